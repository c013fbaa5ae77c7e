/**
 * The server's state tables, as the OpenAPI document publishes them (its `x-nimbus-states` extension,
 * generated into generated/states.ts), and the questions a client asks of them: does a resource in this
 * status accept this action, is this status one the server is still moving it out of, where does an
 * action lead. Nothing here needs Node: the web console imports this file too.
 *
 *   if (allows('instance', 'stop', instance.status)) await nimbus.post('/v1/instances/{id}/stop', …);
 */
import { STATE_TABLES } from './generated/states.js';

export { STATE_TABLES };

type Tables = typeof STATE_TABLES;
/** A resource with a state table: `instance`, `volume`, `snapshot`, `vpn`. */
export type StatefulKind = keyof Tables;
export type StateAction<K extends StatefulKind> = keyof Tables[K]['actions'] & string;
export type StateStatus<K extends StatefulKind> = Tables[K]['statuses'][number];

interface Transition {
  readonly from: readonly string[];
  readonly to?: string | Readonly<Record<string, string>>;
  readonly target?: string;
  readonly description?: string;
}

function transition(kind: StatefulKind, action: string): Transition {
  const found = (STATE_TABLES[kind].actions as Readonly<Record<string, Transition>>)[action];
  if (!found) throw new Error(`The ${kind} state table has no action ${action}`);
  return found;
}

/** Whether a `kind` in `status` accepts `action`; from any other status the server answers 409 conflict. */
export function allows<K extends StatefulKind>(kind: K, action: StateAction<K>, status: string): boolean {
  return transition(kind, action).from.includes(status);
}

/** The actions a `kind` in `status` accepts, in the table's order. */
export function allowedActions<K extends StatefulKind>(kind: K, status: string): StateAction<K>[] {
  return (Object.keys(STATE_TABLES[kind].actions) as StateAction<K>[]).filter((action) =>
    allows(kind, action, status),
  );
}

/** Whether the server is still moving a `kind` in `status` on by itself (starting, deleting…): worth polling. */
export function isTransitional(kind: StatefulKind, status: string): boolean {
  return (STATE_TABLES[kind].transitional as readonly string[]).includes(status);
}

/** Whether a snapshot may be taken of a volume, or of an instance's root disk, that is in `status`. */
export function snapshotSourceAllows(source: 'volume' | 'instance', status: string): boolean {
  return (STATE_TABLES.snapshot.create.sources[source] as readonly string[]).includes(status);
}

/**
 * The status `waitFor` waits for once `action` (or `create`) is accepted: where the server then takes the
 * resource, `deleted` when it goes. Undefined when the table names none (the action is done once
 * answered, or the resource goes back where it started).
 */
export function targetOf<K extends StatefulKind>(
  kind: K,
  action: StateAction<K> | 'create',
): string | undefined {
  const target: string | undefined =
    action === 'create' ? STATE_TABLES[kind].create.target : transition(kind, action).target;
  return target === 'gone' ? 'deleted' : target;
}
