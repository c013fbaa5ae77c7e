/**
 * The state tables, published: the OpenAPI document carries them as its `x-nimbus-states` extension, so
 * a client (the console, the CLI, anyone's script through the SDK's `allows`) knows which action a
 * resource accepts in a given status without writing the rule again. The tables are the resources' own
 * (resources/<kind>/states.ts), as the lifecycle runs them (Lifecycle.stateTables); this module only
 * renders them as JSON. docs/api.md, "The OpenAPI document", describes the shape.
 */
import { type StateTable, statusAfter } from '../lifecycle/state-table.js';

export const STATES_EXTENSION = 'x-nimbus-states';

export interface PublishedTransition {
  /** The statuses the action may start from; from any other the answer is 409 conflict. */
  from: string[];
  /** The status written at once: the same from every start, or one per status it starts from. Absent: unchanged. */
  to?: string | Record<string, string>;
  /** Where the server then takes the resource (`gone`: deleted). Absent: where `to` leaves it, or back where it started. */
  target?: string;
  /** What else refuses the action (409), beyond the status. */
  description?: string;
}

export interface PublishedStateTable {
  statuses: string[];
  /** The statuses a resource passes through on its way somewhere; the server moves it on by itself. */
  transitional: string[];
  create: {
    status: string;
    target?: string;
    /** The records a create copies from (a snapshot's volume or instance), with the statuses each may be in. */
    sources?: Record<string, string[]>;
  };
  actions: Record<string, PublishedTransition>;
}

export function publishTable(table: StateTable<string, string>): PublishedStateTable {
  const actions: Record<string, PublishedTransition> = {};
  const written = new Set<string>([table.create.status]);
  const targets = new Set<string>(table.create.target === undefined ? [] : [table.create.target]);
  for (const [action, transition] of Object.entries(table.actions)) {
    const published: PublishedTransition = { from: [...transition.from] };
    if (typeof transition.to === 'function') {
      published.to = Object.fromEntries(
        transition.from.map((from) => [from, statusAfter(table, action, from)]),
      );
    } else if (transition.to !== undefined) {
      published.to = transition.to;
    }
    if (transition.target !== undefined) published.target = transition.target;
    if (transition.description !== undefined) published.description = transition.description;
    actions[action] = published;
    if (transition.to !== undefined) {
      for (const from of transition.from) written.add(statusAfter(table, action, from));
    }
    if (transition.target !== undefined) targets.add(transition.target);
  }
  const { status, target, sources } = table.create;
  return {
    statuses: [...table.statuses],
    // Written on the way (by a create or an action) and never where anything is heading.
    transitional: table.statuses.filter((s) => written.has(s) && !targets.has(s)),
    create: {
      status,
      ...(target === undefined ? {} : { target }),
      ...(sources === undefined
        ? {}
        : { sources: Object.fromEntries(Object.entries(sources).map(([kind, from]) => [kind, [...from]])) }),
    },
    actions,
  };
}

/** Adds the extension at the document's root: each table under the name of its kind. */
export function publishStateTables(document: object, tables: readonly StateTable<string, string>[]): void {
  (document as Record<string, unknown>)[STATES_EXTENSION] = Object.fromEntries(
    tables.map((table) => [table.kind, publishTable(table)]),
  );
}
