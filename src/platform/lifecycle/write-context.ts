/**
 * What one transaction of the lifecycle core carries besides the transaction itself. It is handed
 * explicitly to everything that writes in that transaction (a service's create or action plan, a
 * reconciler's related write, a batch of scheduled creates), and the core finishes it before COMMIT:
 *
 * - quota usage: every write the core makes through a kind moves the account's counters by what the
 *   record takes (`ResourceKind.usage`). They are written as they go, except in a create that claims
 *   quotas: there they are held back and written, guarded by the limits, as the transaction's last
 *   statements (`QuotaService.claimRooms`), so of concurrent creates only those that fit get through and
 *   the counter rows every create of the account writes are held only from there to the COMMIT;
 * - writes that must come after that claim, in the order given (an instance's GPUs in its region);
 * - the counts a kind keeps by key (instances per account, region and status), summed over the
 *   transaction and written last for the same reason (docs/benchmarks.md, issue 18);
 * - whether the job runner is to be woken once the transaction has committed (something was enqueued).
 *
 * Written last, in that order: the account's counters, then the region's, then the per-status counts, the
 * order every transaction that moves several of them takes them in, so none waits on another in a cycle.
 */
import type { QuotaName } from '../domain/plans.js';
import type { QuotaService } from '../quotas/quotas.js';
import type { Usage } from '../quotas/usage.js';
import { adjustUsage, HeldUsage } from '../quotas/usage-store.js';
import type { Executor } from '../store/schema.js';

/** One quota a create takes: its name and how much of it (an instance: one instance, its vCPUs, its GPUs). */
export type QuotaRequest = readonly [name: QuotaName, requested: number];

/**
 * Counts a kind keeps of its records by key (instances: per account, region and status, which list
 * totals and the instances quota read instead of counting rows). The core moves them on every write it
 * makes through the kind and writes the sums as its transaction's last statements.
 */
export interface KindCounts<R> {
  /** The count the record is in. */
  keyOf(record: R): string;
  /** Adds each key's change (never zero) to its count. */
  write(trx: Executor, changes: ReadonlyMap<string, number>): Promise<void>;
}

interface QuotaClaim {
  accountId: string;
  requests: readonly QuotaRequest[];
  /** The limits `ensureRooms` read; null when nothing was asked for. */
  limits: Record<QuotaName, number> | null;
}

export class WriteContext {
  /** Usage held back for a create's claim; null while usage is written as it moves. */
  private held: HeldUsage | null = null;
  private claim: QuotaClaim | null = null;
  private readonly lastWrites: (() => Promise<void>)[] = [];
  // Keyed by the kind's counts declaration (one object per kind); the record type does not matter here.
  private readonly counts = new Map<KindCounts<never>, Map<string, number>>();
  private wake = false;

  /** Made by the lifecycle core only, which also calls `finish` before COMMIT. */
  constructor(
    readonly trx: Executor,
    private readonly quotas: QuotaService,
  ) {}

  /** Moves the account's counters by `delta`: held back once a create holds usage, written now otherwise. */
  async moveUsage(accountId: string, delta: Usage): Promise<void> {
    if (this.held) this.held.add(accountId, delta);
    else await adjustUsage(this.trx, accountId, delta);
  }

  /** From here on, usage moved in this transaction is held back, to be claimed at its end (`claimQuotas`). */
  holdUsage(): void {
    if (this.held) throw new Error('One create per transaction holds quota usage');
    this.held = new HeldUsage();
  }

  /** At the end, write the held usage guarded by `limits` (a refusal is a 403 that rolls everything back). */
  claimQuotas(claim: QuotaClaim): void {
    this.claim = claim;
  }

  /** A write made at the end, after the quota claim and before the counts (in the order asked). */
  atEnd(write: () => Promise<void>): void {
    this.lastWrites.push(write);
  }

  /** Moves the kind's count at `key` by `delta`, written at the end. */
  count<R>(counts: KindCounts<R>, key: string, delta: number): void {
    const declaration = counts as KindCounts<never>;
    const sums = this.counts.get(declaration) ?? new Map<string, number>();
    sums.set(key, (sums.get(key) ?? 0) + delta);
    this.counts.set(declaration, sums);
  }

  /** Something was enqueued: the job runner is woken once the transaction commits. */
  wakeAfterCommit(): void {
    this.wake = true;
  }

  get wakesRunner(): boolean {
    return this.wake;
  }

  /** The transaction's last statements: the quota claim, the writes that follow it, the counts. */
  async finish(): Promise<void> {
    const held = this.held;
    this.held = null;
    if (held) {
      const claim = this.claim;
      if (claim) await this.quotas.claimRooms(this.trx, claim.accountId, claim.requests, claim.limits, held);
      else for (const [accountId, delta] of held.take()) await adjustUsage(this.trx, accountId, delta);
    }
    for (const write of this.lastWrites) await write();
    for (const [counts, sums] of this.counts) {
      const changes = new Map([...sums].filter(([, delta]) => delta !== 0));
      if (changes.size > 0) await counts.write(this.trx, changes);
    }
  }
}
