/**
 * The lifecycle core: what every stateful resource (instances now; volumes, snapshots, VPNs, invoices,
 * webhook deliveries as they land) does the same way.
 *
 * A resource kind gives its state table (platform/lifecycle/state-table.ts), how its records are read, held, written
 * and removed (`ResourceKind`), and a reconciler that takes one idempotent step at a time. The core does
 * the rest:
 *
 * - `act`: in one transaction, hold the record, check the action against the table (409 `conflict` with
 *   `current_status` and `allowed_statuses`), write the new status and the caller's changes guarded by
 *   the version read, record the typed event (outbox), and enqueue the kind's reconcile job.
 * - `create`: insert, record the created event and enqueue the job, in one transaction.
 * - the reconcile job (one per kind, registered with the job runner under the kind's name): it loads the
 *   record, asks the reconciler for one step, and applies what the step says — a guarded write, a write
 *   with its event, a removal with its event — so reconcilers decide and never write themselves.
 * - metering: a kind that is billed says what a record pays in its state (`meter`); every write above that
 *   changes it switches the record's metered interval in the same transaction (resources/billing/meter-store.ts), so
 *   billing reads a history that holds exactly what committed.
 *
 * Every answer a request gets is written before it is given (the job is in the same transaction), so a
 * crash right after a 202 loses nothing; every step is decided from what is found, so a job cut short is
 * simply run again.
 */

import { switchMeter } from '../../resources/billing/meter-store.js';
import { type Meter, meterKey } from '../../resources/billing/rules.js';
import { holdCounts, writeHeldCounts } from '../../resources/instances/store.js';
import type { Clock } from '../domain/clock.js';
import { Conflict, type DomainError, NotFound, type ResourceKind as NotFoundResource } from '../errors.js';
import type { EventData, EventType } from '../events/catalog.js';
import { recordEvent } from '../events/outbox.js';
import type { JobHandler, JobRunner, RunningJob } from '../jobs/runner.js';
import type { Store } from '../store/db.js';
import type { Executor } from '../store/schema.js';
import { isAllowed, type StateTable, statusAfter } from './state-table.js';

export interface LifecycleRecord<Status extends string> {
  id: string;
  account_id: string;
  status: Status;
  version: number;
  updated_at: string;
}

/** The changes a write may carry: the kind's own, plus the status and the time of the write. */
export type Write<Status extends string, Changes> = Changes & { status?: Status; updated_at?: string };

/** One event of a kind: its type, and data beyond what every event of the kind carries. */
export interface KindEvent<E extends EventType> {
  type: E;
  data?: Partial<EventData<E>>;
}

export interface ResourceKind<
  Status extends string,
  Action extends string,
  R extends LifecycleRecord<Status>,
  Changes,
  E extends EventType,
> {
  table: StateTable<Status, Action>;
  /** How not-found errors name the kind. */
  resource: NotFoundResource;
  find(db: Executor, id: string): Promise<R | undefined>;
  /** Reads the account's record and holds it until the transaction ends (requests take turns). */
  lock(trx: Executor, accountId: string, id: string): Promise<R | undefined>;
  insert(trx: Executor, record: R): Promise<void>;
  /** Writes `changes` if the record is still at the version read; undefined when another writer won. */
  update(trx: Executor, current: R, changes: Write<Status, Changes>): Promise<R | undefined>;
  /** Deletes the record and what it owns if it is still at the version read; false otherwise. */
  remove(trx: Executor, current: R): Promise<boolean>;
  /** What every event of the kind carries about the record. */
  eventData(record: R): EventData<E>;
  /**
   * Why the table refuses `action` on this record, when the kind can say more than the status does (a
   * volume attached elsewhere names its instance); undefined for the table's own 409.
   */
  refusal?(record: R, action: Action): DomainError | undefined;
  /** What the record pays in its current state (resources/billing/rules.ts); absent for kinds that are not billed. */
  meter?(record: R): Meter | null;
}

export interface ActOptions {
  /**
   * Holds other records before this one, in the same transaction: every transaction that holds two kinds
   * of record takes them in one order (an instance before its volumes), so none waits on another in a cycle.
   */
  holdFirst?: (trx: Executor) => Promise<void>;
}

/** What a request's action does beyond the status the table gives it. */
export interface ActionPlan<Status extends string, Changes, E extends EventType> {
  changes?: Write<Status, Changes>;
  event?: KindEvent<E>;
  /** Whether the reconciler must look again; by default, when the status changed. */
  reconcile?: boolean;
}

/**
 * A write of a related record of another kind that belongs with a step's own, made in the same
 * transaction (a restored volume reports `snapshot.restored` on its snapshot). Built by a service over
 * the core (`writeWithin`), so the reconciler that returns it still writes nothing itself.
 */
export type RelatedWrite = (trx: Executor) => Promise<void>;

/** One reconciler step, as the reconciler decides it; the core carries it out. */
export type Step<Status extends string, Changes, E extends EventType> =
  /** Something was asked of the driver: look again now. */
  | { next: 'again' }
  /** Come back at `until` (when the machine should settle), or never by itself (null). */
  | { next: 'wait'; until: Date | null }
  /** Nothing left to do. */
  | { next: 'done' }
  /** Write the changes (guarded by version), with an event when one is given, then look again. */
  | { next: 'advance'; changes: Write<Status, Changes>; event?: KindEvent<E>; related?: RelatedWrite }
  /** The record got where it was going: the changes and their event in one transaction; then done. */
  | { next: 'settle'; changes: Write<Status, Changes>; event: KindEvent<E>; related?: RelatedWrite }
  /** The record is gone: its removal and its event in one transaction; then done. */
  | { next: 'remove'; event: KindEvent<E> };

export interface Reconciler<Status extends string, R, Changes, E extends EventType> {
  /** Decides one step from the record and what the driver reports; idempotent. */
  step(record: R): Promise<Step<Status, Changes, E>>;
  /** The job kept failing: what to write instead (null: leave the record as it is). */
  giveUp(record: R, error: unknown): Step<Status, Changes, E> | null;
}

/** A run takes at most this many steps before yielding to other jobs; it is enqueued again at once. */
const MAX_STEPS_PER_RUN = 12;

export class Lifecycle {
  private readonly tables: StateTable<string, string>[] = [];

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
  ) {}

  /** Registers the kind's reconciler as the handler of its jobs. */
  register<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    kind: ResourceKind<S, A, R, C, E>,
    reconciler: Reconciler<S, R, C, E>,
  ): void {
    // Read as strings only: a table's `to` is only ever called with one of its own statuses.
    this.tables.push(kind.table as unknown as StateTable<string, string>);
    this.jobs.register(kind.table.kind, new ReconcileJob(this, this.store, kind, reconciler, this.clock));
  }

  /** The state tables of the registered kinds, in the order they were registered (the document publishes them). */
  stateTables(): readonly StateTable<string, string>[] {
    return this.tables;
  }

  /**
   * Inserts the record `build` makes (in its status from the table), records `event`, and enqueues the
   * reconciler when the table gives a target — one transaction, in which `build` may do its own checks.
   */
  async create<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    kind: ResourceKind<S, A, R, C, E>,
    event: E,
    build: (trx: Executor) => Promise<R>,
  ): Promise<R> {
    const reconcile = kind.table.create.target !== undefined;
    const record = await this.transaction(async (trx) => {
      const record = await build(trx);
      await kind.insert(trx, record);
      await this.meterChange(trx, kind, undefined, record);
      await this.recordKindEvent(trx, kind, record, { type: event });
      if (reconcile) await this.jobs.enqueue(trx, kind.table.kind, record.id);
      return record;
    });
    if (reconcile) this.jobs.wake();
    return record;
  }

  /**
   * Inserts `record` (built by the caller) inside the caller's transaction, with its created event and
   * its job (a restore makes a new volume inside the snapshot's transaction). Like `writeWithin`, the job
   * runner is woken by whoever commits (`act` does so when it enqueued).
   */
  async createWithin<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(trx: Executor, kind: ResourceKind<S, A, R, C, E>, event: E, record: R): Promise<R> {
    await kind.insert(trx, record);
    await this.meterChange(trx, kind, undefined, record);
    await this.recordKindEvent(trx, kind, record, { type: event });
    if (kind.table.create.target !== undefined) await this.jobs.enqueue(trx, kind.table.kind, record.id);
    return record;
  }

  /**
   * Asks the kind's reconciler to look at a record again, inside the caller's transaction (a finished
   * root-disk restore lets the instance waiting for it boot).
   */
  async reconcileWithin<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(trx: Executor, kind: ResourceKind<S, A, R, C, E>, id: string): Promise<void> {
    await this.jobs.enqueue(trx, kind.table.kind, id);
  }

  /** Wakes the job runner after a transaction that enqueued work through `createWithin`/`writeWithin` committed. */
  wake(): void {
    this.jobs.wake();
  }

  /**
   * One request's action on one record, in one transaction: hold it, check the action is allowed from its
   * status (concurrent requests take turns, so the second sees what the first wrote and is a 409 only if
   * that status does not allow it), write the table's status and the plan's changes guarded by the
   * version read, record the event, enqueue the reconciler.
   */
  async act<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    kind: ResourceKind<S, A, R, C, E>,
    accountId: string,
    id: string,
    action: A,
    plan: (record: R, trx: Executor) => ActionPlan<S, C, E> | Promise<ActionPlan<S, C, E>>,
    options: ActOptions = {},
  ): Promise<R> {
    const outcome = await this.transaction(async (trx) => {
      await options.holdFirst?.(trx);
      const current = await kind.lock(trx, accountId, id);
      if (!current) throw new NotFound(kind.resource, id);
      if (!isAllowed(kind.table, action, current.status)) {
        throw kind.refusal?.(current, action) ?? conflict(kind.table, action, current.status);
      }
      const { changes, event, reconcile } = await plan(current, trx);
      const status = statusAfter(kind.table, action, current.status);
      const written = await kind.update(trx, current, {
        status,
        ...changes,
        updated_at: this.clock.now().toISOString(),
      } as Write<S, C>);
      // The record is held, so its version still matches; the guard stays, the rule every writer follows.
      if (!written) throw conflict(kind.table, action, current.status);
      await this.meterChange(trx, kind, current, written);
      if (event) await this.recordKindEvent(trx, kind, written, event);
      const enqueue = reconcile ?? written.status !== current.status;
      if (enqueue) await this.jobs.enqueue(trx, kind.table.kind, id);
      return { written, enqueue };
    });
    if (outcome.enqueue) this.jobs.wake();
    return outcome.written;
  }

  /**
   * A guarded write of a record of `kind` made inside another record's transaction (an instance's delete
   * detaches its volumes): the changes, their event, and the kind's job when `reconcile`. The caller holds
   * the transaction; the job runner is woken once it commits (the `act` that holds it does so).
   */
  async writeWithin<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    trx: Executor,
    kind: ResourceKind<S, A, R, C, E>,
    current: R,
    changes: Write<S, C>,
    options: { event?: KindEvent<E>; reconcile?: boolean } = {},
  ): Promise<R | undefined> {
    const written = await kind.update(trx, current, {
      ...changes,
      updated_at: this.clock.now().toISOString(),
    });
    if (!written) return undefined;
    await this.meterChange(trx, kind, current, written);
    if (options.event) await this.recordKindEvent(trx, kind, written, options.event);
    if (options.reconcile) await this.jobs.enqueue(trx, kind.table.kind, current.id);
    return written;
  }

  /**
   * Carries out a reconciler's write (with its event and related write, if any); false when another
   * writer got there first. `finish`: the job that made the write is done, finished in the same
   * transaction when the write is made.
   */
  async write<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    kind: ResourceKind<S, A, R, C, E>,
    current: R,
    changes: Write<S, C>,
    event?: KindEvent<E>,
    related?: RelatedWrite,
    finish?: RunningJob,
  ): Promise<boolean> {
    const at = this.clock.now().toISOString();
    // A write of the record alone needs no transaction; a status change does (it moves the counts too).
    const alone = !event && !related && !finish && !this.changesMeter(kind, current, changes);
    if (alone && (changes.status === undefined || changes.status === current.status))
      return (
        (await kind.update(this.store.background, current, { ...changes, updated_at: at })) !== undefined
      );
    const written = await this.transactionOn(this.store.background, async (trx) => {
      const written = await kind.update(trx, current, { ...changes, updated_at: at });
      if (written) await this.meterChange(trx, kind, current, written);
      if (written && event) await this.recordKindEvent(trx, kind, written, event);
      if (written && related) await related(trx);
      if (written && finish) await finish.finishWithin(trx);
      return written !== undefined;
    });
    if (written && related) this.jobs.wake();
    return written;
  }

  /** Carries out a reconciler's removal with its event; false when the record changed since it was read. */
  async remove<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    kind: ResourceKind<S, A, R, C, E>,
    current: R,
    event: KindEvent<E>,
    finish?: RunningJob,
  ): Promise<boolean> {
    return this.transactionOn(this.store.background, async (trx) => {
      if (!(await kind.remove(trx, current))) return false;
      await this.meterChange(trx, kind, current, undefined);
      await this.recordKindEvent(trx, kind, current, event);
      await finish?.finishWithin(trx);
      return true;
    });
  }

  /**
   * A transaction of the core's own: the per-status counts its writes move (resources/instances/store.ts) are held
   * back and written as its last statement before COMMIT. On PostgreSQL those rows are shared by every
   * write of the account in the region, and a writer holds them until COMMIT: a boot's settle used to
   * move them first and then hold them through its meter, event and job statements, while the account's
   * creates and other boots queued behind it. Public for a create that writes more in the same
   * transaction (instances: quota counters and GPU capacity).
   */
  transaction<T>(work: (trx: Executor) => Promise<T>): Promise<T> {
    return this.transactionOn(this.store.db, work);
  }

  /** `transaction` on `db`: the store's handle for requests, or for background work (a job's writes). */
  private transactionOn<T>(db: Store['db'], work: (trx: Executor) => Promise<T>): Promise<T> {
    return db.transaction().execute(async (trx) => {
      holdCounts(trx);
      const result = await work(trx);
      await writeHeldCounts(trx);
      return result;
    });
  }

  /** Whether writing `changes` would change what the record pays (so the write needs a transaction). */
  private changesMeter<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(kind: ResourceKind<S, A, R, C, E>, current: R, changes: Write<S, C>): boolean {
    if (!kind.meter) return false;
    return meterKey(kind.meter(current)) !== meterKey(kind.meter({ ...current, ...changes }));
  }

  /**
   * Switches the record's metered interval when what it pays changed between `before` and `after`
   * (undefined: not there), inside the transaction of the write; at the same instant as the write.
   */
  private async meterChange<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(
    trx: Executor,
    kind: ResourceKind<S, A, R, C, E>,
    before: R | undefined,
    after: R | undefined,
  ): Promise<void> {
    if (!kind.meter) return;
    const previous = before ? kind.meter(before) : null;
    const next = after ? kind.meter(after) : null;
    if (meterKey(previous) === meterKey(next)) return;
    const record = (after ?? before) as R;
    const at = new Date(after?.updated_at ?? this.clock.now().toISOString());
    // A record made in this transaction has no interval open to end.
    await switchMeter(trx, record.id, next, at, before === undefined);
  }

  private async recordKindEvent<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(trx: Executor, kind: ResourceKind<S, A, R, C, E>, record: R, event: KindEvent<E>): Promise<void> {
    await recordEvent(trx, this.clock, {
      accountId: record.account_id,
      type: event.type,
      resourceId: record.id,
      data: { ...kind.eventData(record), ...event.data } as EventData<E>,
    });
  }
}

/** The job of one kind: load, ask the reconciler for a step, carry it out, until it waits or is done. */
class ReconcileJob<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>
  implements JobHandler
{
  constructor(
    private readonly lifecycle: Lifecycle,
    private readonly store: Store,
    private readonly kind: ResourceKind<S, A, R, C, E>,
    private readonly reconciler: Reconciler<S, R, C, E>,
    private readonly clock: Clock,
  ) {}

  async run(id: string, job?: RunningJob): Promise<Date | null> {
    for (let step = 0; step < MAX_STEPS_PER_RUN; step++) {
      // What is committed, without waiting for the writes of requests in progress: every write a step
      // makes is guarded by the version read here, and the request that changes the record enqueues
      // this job again, so a step decided on a record about to change loses its write and looks again.
      const record = await this.kind.find(this.store.committedReads, id);
      if (!record) return null;
      const outcome = await this.carryOut(record, await this.reconciler.step(record), job);
      if (outcome !== 'again') return outcome;
    }
    return this.clock.now();
  }

  async giveUp(id: string, error: unknown): Promise<void> {
    const record = await this.kind.find(this.store.background, id);
    const step = record ? this.reconciler.giveUp(record, error) : null;
    if (record && step) await this.carryOut(record, step);
  }

  /**
   * 'again' to look once more (also when a write lost to a concurrent one), or when to come back. A
   * settling write or a removal ends the job: it is finished in the same transaction (`job`).
   */
  private async carryOut(record: R, step: Step<S, C, E>, job?: RunningJob): Promise<'again' | Date | null> {
    switch (step.next) {
      case 'again':
        return 'again';
      case 'wait':
        return step.until;
      case 'done':
        return null;
      case 'advance':
        await this.lifecycle.write(this.kind, record, step.changes, step.event, step.related);
        return 'again';
      case 'settle':
        return (await this.lifecycle.write(this.kind, record, step.changes, step.event, step.related, job))
          ? null
          : 'again';
      case 'remove':
        return (await this.lifecycle.remove(this.kind, record, step.event, job)) ? null : 'again';
    }
  }
}

/**
 * The 409 of an action the table refuses (`current_status`, `allowed_statuses`); a kind's `refusal` may
 * add its reason in front of the message and more details (e.g. the instance holding a volume).
 */
export function conflict<S extends string, A extends string>(
  table: StateTable<S, A>,
  action: A,
  status: string,
  reason?: { message: string; details: Record<string, unknown> },
) {
  const allowed = table.actions[action].from;
  const verb = action.replaceAll('_', '-');
  const refused = `cannot ${verb} ${article(table.kind)} ${table.kind} that is ${status}; allowed from: ${allowed.join(', ')}`;
  return new Conflict(
    reason ? `${reason.message}: ${refused}` : refused.charAt(0).toUpperCase() + refused.slice(1),
    {
      current_status: status,
      allowed_statuses: [...allowed],
      ...reason?.details,
    },
  );
}

const article = (word: string) => (/^[aeiou]/.test(word) ? 'an' : 'a');
