/**
 * State tables: how a stateful resource (an instance, later a volume, a snapshot, a VPN…) declares its
 * lifecycle as data. For each action the user can ask for, the table says from which statuses it may
 * start, which status the resource takes at once (usually a transitional one such as `stopping`), and
 * where it is heading once the reconciler has done the work (`target`, with the event that reports
 * it). platform/lifecycle/lifecycle.ts applies a table to any kind; nothing here touches the store.
 */

export interface Transition<Status extends string> {
  /** The statuses the action may start from; any other is a 409 conflict. */
  from: readonly Status[];
  /** The status written when the action is accepted; a function when it depends on where it starts. Absent: unchanged. */
  to?: Status | ((current: Status) => Status);
  /** Where the reconciler takes the resource; absent when the action is complete once written. */
  target?: Status | 'gone';
  /** What else refuses the action (409) beyond the status, in words: published with the table. */
  description?: string;
}

export interface StateTable<Status extends string, Action extends string> {
  /** The resource kind, as error details and job keys name it (`instance`). */
  kind: string;
  statuses: readonly Status[];
  /**
   * The status a new resource starts in, and where the reconciler takes it from there. `sources`: the
   * records a create copies from, each with the statuses it may be in (a snapshot's volume or instance).
   */
  create: { status: Status; target?: Status; sources?: Readonly<Record<string, readonly string[]>> };
  actions: Readonly<Record<Action, Transition<Status>>>;
}

export function defineStateTable<Status extends string, Action extends string>(
  table: StateTable<Status, Action>,
): StateTable<Status, Action> {
  for (const [action, transition] of Object.entries<Transition<Status>>(table.actions)) {
    for (const status of transition.from) {
      if (!table.statuses.includes(status)) {
        throw new Error(`${table.kind} state table: ${action} starts from unknown status ${status}`);
      }
    }
  }
  return table;
}

export function isAllowed<Status extends string, Action extends string>(
  table: StateTable<Status, Action>,
  action: Action,
  status: string,
): status is Status {
  return (table.actions[action].from as readonly string[]).includes(status);
}

/** The status an accepted action writes at once. */
export function statusAfter<Status extends string, Action extends string>(
  table: StateTable<Status, Action>,
  action: Action,
  current: Status,
): Status {
  const to = table.actions[action].to;
  if (to === undefined) return current;
  return typeof to === 'function' ? to(current) : to;
}

/** Every status of the table except those named. */
export function statusesExcept<Status extends string>(
  statuses: readonly Status[],
  ...excluded: Status[]
): Status[] {
  return statuses.filter((s) => !excluded.includes(s));
}
