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
 * - `create`: the one way a record of a kind is made. In one transaction: hold what the record depends on
 *   (the service's `hold`), check its quotas from what is committed, build it, insert it, record the
 *   created event and enqueue its job, mark the request's Idempotency-Key committed with it
 *   (platform/idempotency/context.ts), and claim its quotas, guarded, as the last statements; the job
 *   runner is woken once it commits.
 *   A record made as part of another's create (an instance's root volume) goes through `createPartWithin`
 *   in the parent's transaction: inserted the same way, announced and claimed by its parent.
 * - the reconcile job (one per kind, registered with the job runner under the kind's name): it loads the
 *   record, asks the reconciler for one step, and applies what the step says — a guarded write, a write
 *   with its event, a removal with its event — so reconcilers decide and never write themselves.
 * - what a kind declares beyond its records: the quota usage a record takes (`usage`), the counts it keeps
 *   (`counts`) and what it pays (`meter`). Every write above moves them in its own transaction: usage and
 *   counts through the transaction's context (write-context.ts), the meter through the `Metering` the
 *   composition root gives (metering.ts), so billing reads a history that holds exactly what committed.
 *
 * Each transaction of the core has its context (`WriteContext`): the callbacks it runs get it, not the
 * bare transaction, and write through it what the core finishes before COMMIT and after.
 *
 * Every answer a request gets is written before it is given (the job is in the same transaction), so a
 * crash right after a 202 loses nothing; every step is decided from what is found, so a job cut short is
 * simply run again.
 */

import type { Clock } from '../domain/clock.js';
import { Conflict, type DomainError, NotFound, type ResourceKind as NotFoundResource } from '../errors.js';
import type { EventData, EventType } from '../events/catalog.js';
import { recordEvent } from '../events/outbox.js';
import { recordCreated } from '../idempotency/context.js';
import type { JobHandler, JobRunner, RunningJob } from '../jobs/runner.js';
import type { QuotaService } from '../quotas/quotas.js';
import { type Usage, usageDelta } from '../quotas/usage.js';
import type { Store } from '../store/db.js';
import type { Executor } from '../store/schema.js';
import type { BilledState, Metering } from './metering.js';
import { isAllowed, type StateTable, statusAfter } from './state-table.js';
import { type KindCounts, type QuotaRequest, WriteContext } from './write-context.js';

export type { BilledState, Metering } from './metering.js';
export type { KindCounts, QuotaRequest } from './write-context.js';
export { WriteContext } from './write-context.js';

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
  /** What the record pays in its current state (for billing's `Metering`); absent for kinds that are not billed. */
  meter?(record: R): BilledState | null;
  /** What the record takes of its account's quota counters (platform/quotas/usage.ts); absent: nothing. */
  usage?(record: R): Usage;
  /** Counts the kind keeps of its records by key, moved by the core on every write. */
  counts?: KindCounts<R>;
  /**
   * Gives back, when the record is removed, what it took of capacity shared beyond its account (an
   * instance's GPUs in its region): after its account's counters have moved, the order creates take
   * them in (account, then region).
   */
  release?(trx: Executor, record: R): Promise<void>;
}

/** What a service gives `create` for one new record of a kind. */
export interface CreatePlan<S extends string, R extends LifecycleRecord<S>, E extends EventType, Held> {
  /** The event that announces the record. */
  event: E;
  /** The account the record belongs to, whose quotas it takes. */
  accountId: string;
  /**
   * The quotas the record takes. Checked from what is committed after `hold` (an early answer; for the
   * quotas that are not counters, under the lock `hold` took), and claimed at the end of the transaction,
   * each counter guarded by its limit. Without them, the record's usage is written as it moves.
   */
  quotas?: readonly QuotaRequest[];
  /**
   * Holds and checks what the record depends on, before its quotas are checked (a volume's instance, a
   * snapshot's source, the account for a quota that is counted by rows); its result goes to `build`.
   */
  hold?(ctx: WriteContext): Promise<Held>;
  /** The record (in the table's create status), and the related records made with it, in the transaction. */
  build(ctx: WriteContext, held: Held): R | Promise<R>;
  /**
   * What the record takes, besides its quotas, of rows every create of the region writes (an instance's
   * GPUs): written after the quota claim, at the end of the transaction.
   */
  claim?(ctx: WriteContext, record: R): Promise<void>;
  /**
   * Whether the record is what the request being served answers with (default true), so that a keyed
   * request's Idempotency-Key is marked committed with it. Work no request waits for (scheduled snapshots)
   * says false.
   */
  answersRequest?: boolean;
}

/**
 * What a service gives `createPartWithin` for a record made as part of another record's create (an
 * instance's root volume). The parent's create announces both, answers the request and takes the quotas,
 * so the part has no created event, job, Idempotency-Key mark or quota claim of its own.
 */
export interface PartPlan<S extends string, R extends LifecycleRecord<S>> {
  /** The record, in the status the parent's create gives it (a root volume: in-use, or restoring). */
  record: R;
  /** Whether its reconciler must look at it from the start (a root volume restored from a snapshot). */
  reconcile?: boolean;
}

export interface LifecycleOptions {
  quotas: QuotaService;
  /** Billing's meter store; required once a kind that has `meter` is written. */
  metering?: Metering;
}

export interface ActOptions {
  /**
   * Holds other records before this one, in the same transaction: every transaction that holds two kinds
   * of record takes them in one order (an instance before its volumes), so none waits on another in a cycle.
   */
  holdFirst?: (ctx: WriteContext) => Promise<void>;
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
export type RelatedWrite = (ctx: WriteContext) => Promise<void>;

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
  private readonly quotas: QuotaService;
  private readonly metering: Metering | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
    options: LifecycleOptions,
  ) {
    this.quotas = options.quotas;
    this.metering = options.metering;
  }

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
   * Makes one record of `kind`, in a transaction of its own (see `createWithin` for the steps); the job
   * runner is woken once it commits.
   */
  create<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType, Held>(
    kind: ResourceKind<S, A, R, C, E>,
    plan: CreatePlan<S, R, E, Held>,
  ): Promise<R> {
    return this.transaction((ctx) => this.createWithin(ctx, kind, plan));
  }

  /**
   * Makes one record of `kind` inside the transaction of `ctx` (a restore's new volume, inside the
   * snapshot's action; the scheduler's snapshots, in its batch): holds what it depends on (`hold`), checks
   * its quotas, builds it, inserts it with its usage, counts and meter, records the created event,
   * enqueues its job when the table gives a target, marks the request's Idempotency-Key committed with it,
   * and leaves the quota claim (then the plan's `claim`) to the end of the transaction.
   */
  async createWithin<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
    Held,
  >(ctx: WriteContext, kind: ResourceKind<S, A, R, C, E>, plan: CreatePlan<S, R, E, Held>): Promise<R> {
    if (plan.quotas) ctx.holdUsage();
    const held = plan.hold ? await plan.hold(ctx) : (undefined as Held);
    if (plan.quotas) {
      const limits = await this.quotas.ensureRooms(ctx.trx, plan.accountId, plan.quotas);
      ctx.claimQuotas({ accountId: plan.accountId, requests: plan.quotas, limits });
    }
    const record = await plan.build(ctx, held);
    await kind.insert(ctx.trx, record);
    await this.moved(ctx, kind, undefined, record);
    await this.recordKindEvent(ctx.trx, kind, record, { type: plan.event });
    if (kind.table.create.target !== undefined) await this.enqueue(ctx, kind, record.id);
    if (plan.answersRequest !== false) await recordCreated(ctx.trx, kind.resource, record.id);
    const claim = plan.claim;
    if (claim) ctx.atEnd(() => claim(ctx, record));
    return record;
  }

  /**
   * Makes a record of `kind` that is part of another's create, inside that create's transaction (an
   * instance's root volume, in the instance's `build`). It is inserted with the usage, counts and meter
   * the kind declares, like every record the core makes, and its job is enqueued only when the plan says
   * so; see `PartPlan` for what it leaves to the parent.
   */
  async createPartWithin<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(ctx: WriteContext, kind: ResourceKind<S, A, R, C, E>, plan: PartPlan<S, R>): Promise<R> {
    await kind.insert(ctx.trx, plan.record);
    await this.moved(ctx, kind, undefined, plan.record);
    if (plan.reconcile) await this.enqueue(ctx, kind, plan.record.id);
    return plan.record;
  }

  /**
   * Asks the kind's reconciler to look at a record again, inside the transaction of `ctx` (a finished
   * root-disk restore lets the instance waiting for it boot).
   */
  async reconcileWithin<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(ctx: WriteContext, kind: ResourceKind<S, A, R, C, E>, id: string): Promise<void> {
    await this.enqueue(ctx, kind, id);
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
    plan: (record: R, ctx: WriteContext) => ActionPlan<S, C, E> | Promise<ActionPlan<S, C, E>>,
    options: ActOptions = {},
  ): Promise<R> {
    return this.transaction(async (ctx) => {
      await options.holdFirst?.(ctx);
      const current = await kind.lock(ctx.trx, accountId, id);
      if (!current) throw new NotFound(kind.resource, id);
      if (!isAllowed(kind.table, action, current.status)) {
        throw kind.refusal?.(current, action) ?? conflict(kind.table, action, current.status);
      }
      const { changes, event, reconcile } = await plan(current, ctx);
      const status = statusAfter(kind.table, action, current.status);
      const written = await kind.update(ctx.trx, current, {
        status,
        ...changes,
        updated_at: this.clock.now().toISOString(),
      } as Write<S, C>);
      // The record is held, so its version still matches; the guard stays, the rule every writer follows.
      if (!written) throw conflict(kind.table, action, current.status);
      await this.moved(ctx, kind, current, written);
      if (event) await this.recordKindEvent(ctx.trx, kind, written, event);
      if (reconcile ?? written.status !== current.status) await this.enqueue(ctx, kind, id);
      return written;
    });
  }

  /**
   * A guarded write of a record of `kind` made inside another record's transaction (an instance's delete
   * detaches its volumes): the changes, their event, and the kind's job when `reconcile`.
   */
  async writeWithin<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    ctx: WriteContext,
    kind: ResourceKind<S, A, R, C, E>,
    current: R,
    changes: Write<S, C>,
    options: { event?: KindEvent<E>; reconcile?: boolean } = {},
  ): Promise<R | undefined> {
    const written = await kind.update(ctx.trx, current, {
      ...changes,
      updated_at: this.clock.now().toISOString(),
    });
    if (!written) return undefined;
    await this.moved(ctx, kind, current, written);
    if (options.event) await this.recordKindEvent(ctx.trx, kind, written, options.event);
    if (options.reconcile) await this.enqueue(ctx, kind, current.id);
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
    // A write of the record alone needs no transaction; a status change does (it may move counts), and
    // so does one that moves the record's usage, counts or meter.
    const alone = !event && !related && !finish && !this.movesMore(kind, current, changes);
    if (alone && (changes.status === undefined || changes.status === current.status))
      return (
        (await kind.update(this.store.background, current, { ...changes, updated_at: at })) !== undefined
      );
    return this.transactionOn(this.store.background, async (ctx) => {
      const written = await kind.update(ctx.trx, current, { ...changes, updated_at: at });
      if (!written) return false;
      await this.moved(ctx, kind, current, written);
      if (event) await this.recordKindEvent(ctx.trx, kind, written, event);
      if (related) await related(ctx);
      if (finish) await finish.finishWithin(ctx.trx);
      return true;
    });
  }

  /** Carries out a reconciler's removal with its event; false when the record changed since it was read. */
  async remove<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    kind: ResourceKind<S, A, R, C, E>,
    current: R,
    event: KindEvent<E>,
    finish?: RunningJob,
  ): Promise<boolean> {
    return this.transactionOn(this.store.background, async (ctx) => {
      if (!(await kind.remove(ctx.trx, current))) return false;
      await this.moved(ctx, kind, current, undefined);
      await kind.release?.(ctx.trx, current);
      await this.recordKindEvent(ctx.trx, kind, current, event);
      await finish?.finishWithin(ctx.trx);
      return true;
    });
  }

  /**
   * A transaction of the core's own, for work that writes several records through it (the snapshot
   * scheduler's batch): `work` gets its context; what the context holds is written as the last statements
   * before COMMIT (write-context.ts), and the job runner is woken after the COMMIT when anything was
   * enqueued.
   */
  transaction<T>(work: (ctx: WriteContext) => Promise<T>): Promise<T> {
    return this.transactionOn(this.store.db, work);
  }

  /** `transaction` on `db`: the store's handle for requests, or for background work (a job's writes). */
  private async transactionOn<T>(db: Store['db'], work: (ctx: WriteContext) => Promise<T>): Promise<T> {
    let wake = false;
    const result = await db.transaction().execute(async (trx) => {
      const ctx = new WriteContext(trx, this.quotas);
      const result = await work(ctx);
      await ctx.finish();
      wake = ctx.wakesRunner;
      return result;
    });
    if (wake) this.jobs.wake();
    return result;
  }

  private async enqueue<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(ctx: WriteContext, kind: ResourceKind<S, A, R, C, E>, id: string): Promise<void> {
    await this.jobs.enqueue(ctx.trx, kind.table.kind, id);
    ctx.wakeAfterCommit();
  }

  /**
   * What a write of the record moves besides the record, from `before` to `after` (undefined: not
   * there): the account's usage, the kind's counts, its meter.
   */
  private async moved<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(
    ctx: WriteContext,
    kind: ResourceKind<S, A, R, C, E>,
    before: R | undefined,
    after: R | undefined,
  ): Promise<void> {
    const record = (after ?? before) as R;
    if (kind.usage) {
      const delta = usageDelta(before ? kind.usage(before) : null, after ? kind.usage(after) : null);
      if (Object.keys(delta).length > 0) await ctx.moveUsage(record.account_id, delta);
    }
    if (kind.counts) {
      const from = before && kind.counts.keyOf(before);
      const to = after && kind.counts.keyOf(after);
      if (from !== to) {
        if (from !== undefined) ctx.count(kind.counts, from, -1);
        if (to !== undefined) ctx.count(kind.counts, to, 1);
      }
    }
    await this.meterChange(ctx.trx, kind, before, after);
  }

  /** Whether writing `changes` would move the record's usage, counts or meter (so it needs a transaction). */
  private movesMore<S extends string, A extends string, R extends LifecycleRecord<S>, C, E extends EventType>(
    kind: ResourceKind<S, A, R, C, E>,
    current: R,
    changes: Write<S, C>,
  ): boolean {
    const next = { ...current, ...changes } as R;
    if (kind.usage && Object.keys(usageDelta(kind.usage(current), kind.usage(next))).length > 0) return true;
    if (kind.counts && kind.counts.keyOf(current) !== kind.counts.keyOf(next)) return true;
    if (!kind.meter) return false;
    const metering = this.meteringFor(kind);
    return metering.key(kind.meter(current)) !== metering.key(kind.meter(next));
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
    const metering = this.meteringFor(kind);
    const previous = before ? kind.meter(before) : null;
    const next = after ? kind.meter(after) : null;
    if (metering.key(previous) === metering.key(next)) return;
    const record = (after ?? before) as R;
    const at = new Date(after?.updated_at ?? this.clock.now().toISOString());
    // A record made in this transaction has no interval open to end.
    await metering.switchMeter(trx, record.id, next, at, before === undefined);
  }

  private meteringFor<
    S extends string,
    A extends string,
    R extends LifecycleRecord<S>,
    C,
    E extends EventType,
  >(kind: ResourceKind<S, A, R, C, E>): Metering {
    if (!this.metering) throw new Error(`The ${kind.table.kind} kind is billed, but no metering was given`);
    return this.metering;
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
    let record: R | undefined;
    for (let step = 0; step < MAX_STEPS_PER_RUN; step++) {
      // What is committed, without waiting for the writes of requests in progress: every write a step
      // makes is guarded by the version read here, and the request that changes the record enqueues
      // this job again, so a step decided on a record about to change loses its write and looks again.
      record ??= await this.kind.find(this.store.committedReads, id);
      if (!record) return null;
      const decided = await this.reconciler.step(record);
      const outcome = await this.carryOut(record, decided, job);
      if (outcome !== 'again') return outcome;
      // A step that only asked the driver wrote nothing to the record: the next look decides on the same
      // one (a round trip fewer). A request that changed it meanwhile enqueued this job again, so this
      // run's reschedule loses to it and the job runs again at once, with what the request wrote.
      if (decided.next !== 'again') record = undefined;
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
