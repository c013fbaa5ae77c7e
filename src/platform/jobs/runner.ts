/**
 * The job runner: runs the durable jobs of the store's jobs table (platform/jobs/store.ts).
 *
 * A job is a key (`instance:<id>`), a kind and a run_at. Work that must not be lost is enqueued in the
 * same transaction as the state change that needs it, so if the change committed, so did the job. The
 * runner claims due jobs under a lease, runs each kind's handler, and settles the job by the outcome:
 * done (deleted), again at some time (the handler is waiting for a machine), or failed (retried with
 * backoff; after MAX_ATTEMPTS the handler gives up on it). A process that dies holding a lease loses it
 * when the lease runs out, and another run picks the job up: handlers must be safe to run twice.
 *
 * Timing: `wake(at)` arms a timer for work this process knows about; a poll every `pollMs` finds jobs
 * other replicas enqueued and jobs left by a previous process. In stepped mode (tests holding a manual
 * clock) there are no timers at all: the test moves the clock and calls `runDue()`.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../domain/clock.js';
import { newId } from '../domain/ids.js';
import { asSystem } from '../events/actor.js';
import type { Store } from '../store/db.js';
import type { Executor, JobRow } from '../store/schema.js';
import { claimDueJobs, finishJob, rescheduleJob, upsertJob } from './store.js';

/** What a handler may do with the job it runs. */
export interface RunningJob {
  /**
   * Finishes the job inside the handler's own transaction, with the write that ended its work (one
   * commit instead of two). Once that transaction has committed and the handler returns null, the runner
   * has nothing left to write; if the transaction rolls back, neither happened.
   */
  finishWithin(trx: Executor): Promise<void>;
}

export interface JobHandler {
  /** Does the next step for the subject; returns when to come back, or null when there is nothing left. */
  run(subjectId: string, job?: RunningJob): Promise<Date | null>;
  /** Called once a job has failed MAX_ATTEMPTS times in a row. */
  giveUp(subjectId: string, error: unknown): Promise<void>;
}

export interface JobRunnerOptions {
  /** false: stepped mode, no timers; the caller runs `runDue()`. */
  automatic: boolean;
  pollMs?: number;
  leaseMs?: number;
  /**
   * Jobs claimed at most per claim (one transaction). Claims are made one after another, each waiting for
   * its commit, so under load (a group commit every few hundred ms) this bounds how many job runs start
   * per second: 16 a claim held boots to about 30/s. Default: 128 on SQLite, 32 on PostgreSQL.
   */
  batchSize?: number;
  /**
   * Jobs running at once in this process. A job spends most of its time waiting for its turn at the
   * store and for commits, not on the CPU, so under load the runner keeps pace only with many in flight.
   * Default: 512 on SQLite, where their statements share the group commit with the requests'; 64 on
   * PostgreSQL, where they take turns at the store's background pool (`Store.background`, apart from the
   * requests' since a boot's statements queued behind 64 clients' requests and the boots fell behind
   * the creates: docs/benchmarks.md, issue 18).
   */
  maxInFlight?: number;
  /** Called when a handler throws (the runner itself never stops on it). */
  onError?: (error: unknown, job: JobRow) => void;
}

export const MAX_ATTEMPTS = 10;
/**
 * A job that asks to come back within this many ms waits for it in process, keeping its lease (at most
 * SHORT_WAITS_PER_CLAIM times a claim), instead of being rescheduled and claimed again: that is two
 * writes and, under load, two group commits of a few hundred ms each, longer than the wait itself (a
 * machine that boots fast: 8 ms with the simulator at speed-up 1000). Automatic mode only: a test that
 * steps the jobs by hand sees every reschedule.
 */
const SHORT_WAIT_MS = 200;
const SHORT_WAITS_PER_CLAIM = 4;
/** A short wait is only taken by a job whose lease lasts at least this much longer. */
const LEASE_MARGIN_MS = 5_000;
const MAX_BACKOFF_MS = 60_000;
/**
 * setTimeout's longest delay (2^31 - 1 ms, 24.8 days). Node fires a longer one after 1 ms instead, with a
 * TimeoutOverflowWarning.
 */
const MAX_TIMER_MS = 2_147_483_647;

export class JobRunner {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly owner = `runner_${randomUUID()}`;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly batchSize: number;
  private readonly maxInFlight: number;
  private pollTimer: NodeJS.Timeout | null = null;
  private wakeTimer: NodeJS.Timeout | null = null;
  private wakeAt = Number.POSITIVE_INFINITY;
  /**
   * Times `wake(at)` asked for that are later than the armed timer's. One timer is armed at a time (the
   * earliest); when it fires the next of these is armed, so a job due at a known time (the collector's
   * next tick) runs then, not at the next poll after a sooner wake took its timer.
   */
  private readonly laterWakes = new Set<number>();
  private running: Promise<number> | null = null;
  private rerun = false;
  /** Set while a run waits for one of its jobs to end: a call to `runDue` meanwhile makes it claim again. */
  private poke: (() => void) | null = null;
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: JobRunnerOptions,
  ) {
    this.pollMs = options.pollMs ?? 1_000;
    this.leaseMs = options.leaseMs ?? 30_000;
    const sqlite = store.kind === 'sqlite';
    this.batchSize = options.batchSize ?? (sqlite ? 128 : 32);
    this.maxInFlight = Math.max(1, options.maxInFlight ?? (sqlite ? 512 : 64));
  }

  /** One handler per job kind: the lifecycle core registers each resource kind's reconciler here. */
  register(kind: string, handler: JobHandler): void {
    this.handlers.set(kind, handler);
  }

  handlerOf(kind: string): JobHandler | undefined {
    return this.handlers.get(kind);
  }

  /** Records the job in the caller's transaction; call `wake()` once that transaction has committed. */
  async enqueue(trx: Executor, kind: string, subjectId: string, runAt?: Date): Promise<void> {
    const now = this.clock.now();
    await upsertJob(trx, {
      id: newId('job', now),
      key: `${kind}:${subjectId}`,
      kind,
      subjectId,
      runAt: runAt ?? now,
      now,
    });
  }

  start(): void {
    if (!this.options.automatic || this.pollTimer) return;
    this.pollTimer = setInterval(() => this.wake(), this.pollMs);
    this.pollTimer.unref();
    this.wake();
  }

  /** Runs due jobs at `at` (default: now) in this process, without waiting for the next poll. */
  wake(at?: Date): void {
    if (!this.options.automatic || this.stopped) return;
    const when = at?.getTime() ?? 0;
    if (when >= this.wakeAt) {
      if (when > this.wakeAt) this.laterWakes.add(when);
      return;
    }
    if (this.wakeTimer) {
      clearTimeout(this.wakeTimer);
      this.laterWakes.add(this.wakeAt);
    }
    this.arm(when);
  }

  private arm(when: number): void {
    this.wakeAt = when;
    const delay = Math.max(0, when - this.clock.now().getTime());
    if (delay > MAX_TIMER_MS) {
      // Further off than one timer reaches (a job due next month): wake at the longest delay and arm
      // again for the rest.
      this.wakeTimer = setTimeout(() => this.arm(when), MAX_TIMER_MS);
      return;
    }
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.wakeAt = Number.POSITIVE_INFINITY;
      this.armNextLater();
      void this.runDue().catch(() => {});
    }, delay);
  }

  /** Arms the earliest remembered wake still to come (those past now are served by the run starting). */
  private armNextLater(): void {
    const now = this.clock.now().getTime();
    let next = Number.POSITIVE_INFINITY;
    for (const at of this.laterWakes) {
      if (at <= now) this.laterWakes.delete(at);
      else if (at < next) next = at;
    }
    if (next === Number.POSITIVE_INFINITY || this.stopped) return;
    this.laterWakes.delete(next);
    this.arm(next);
  }

  /**
   * Runs every due job, batch after batch, until none is due; returns how many ran. A call made while a
   * run is going joins it, and that run goes round once more, so jobs that became due meanwhile have
   * run when the call returns.
   */
  runDue(): Promise<number> {
    if (this.running) {
      this.rerun = true;
      this.poke?.();
      return this.running;
    }
    // Jobs are the platform's work, whoever's request woke the runner (platform/events/actor.ts).
    this.running = asSystem(async () => {
      let ran = 0;
      do {
        this.rerun = false;
        ran += await this.drain();
      } while (this.rerun && !this.stopped);
      return ran;
    }).finally(() => {
      this.running = null;
    });
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.pollTimer = null;
    this.wakeTimer = null;
    this.laterWakes.clear();
    await this.running?.catch(() => {});
  }

  /**
   * Claims due jobs and runs them, keeping up to maxInFlight running: a claim is made as soon as there is
   * room or a job falls due, not once the whole previous batch has ended, so one slow job (or one waiting
   * behind the requests for its commit) does not hold back the others. Returns when nothing is due or
   * running.
   */
  private async drain(): Promise<number> {
    let ran = 0;
    const inFlight = new Set<Promise<void>>();
    while (!this.stopped) {
      const room = this.maxInFlight - inFlight.size;
      if (room > 0) {
        const now = this.clock.now();
        const asked = Math.min(room, this.batchSize);
        const jobs = await claimDueJobs(
          this.store,
          this.owner,
          now,
          new Date(now.getTime() + this.leaseMs),
          asked,
        );
        for (const job of jobs) {
          const running: Promise<void> = this.runOne(job)
            .catch((error) => this.options.onError?.(error, job))
            .finally(() => inFlight.delete(running));
          inFlight.add(running);
        }
        ran += jobs.length;
        // As many as asked: more may be due (a backlog), so claim again while there is room. Fewer:
        // nothing else is due now; claim again once a job ends (it may have made another due).
        if (jobs.length === asked) continue;
      }
      if (inFlight.size === 0) break;
      // Until a job ends, or a job falls due (a wake, a new job): a job that takes long (one waiting for
      // a connection, a large collection) must not hold back the ones due meanwhile.
      const poked = new Promise<void>((resolve) => {
        this.poke = resolve;
      });
      await Promise.race([...inFlight, poked]);
      this.poke = null;
    }
    await Promise.all(inFlight);
    return ran;
  }

  /**
   * How long to wait in process, keeping the lease, before running the job again at `next`; null to
   * reschedule it instead. Only a short wait, of a job whose lease outlasts it by far, in automatic mode.
   */
  private shortWait(job: JobRow, next: Date): number | null {
    if (!this.options.automatic || this.stopped) return null;
    const now = this.clock.now().getTime();
    const delay = next.getTime() - now;
    // 0 or less is a run that yielded to the others: it goes back to the table.
    if (delay <= 0 || delay > SHORT_WAIT_MS) return null;
    const leaseUntil = job.lease_until ? Date.parse(job.lease_until) : 0;
    return now + delay + LEASE_MARGIN_MS < leaseUntil ? delay : null;
  }

  private async runOne(job: JobRow): Promise<void> {
    const db = this.store.background;
    const handler = this.handlers.get(job.kind);
    try {
      if (!handler) throw new Error(`no handler for job kind ${job.kind}`);
      let finishedWithin = false;
      const running: RunningJob = {
        finishWithin: async (trx) => {
          await finishJob(trx, job);
          finishedWithin = true;
        },
      };
      let next = await handler.run(job.subject_id, running);
      for (let waits = 0; next !== null && waits < SHORT_WAITS_PER_CLAIM; waits++) {
        const delay = this.shortWait(job, next);
        if (delay === null) break;
        await new Promise((resolve) => setTimeout(resolve, delay));
        if (this.stopped) break;
        next = await handler.run(job.subject_id, running);
      }
      if (next === null) {
        // Finished in the handler's transaction, which committed (the handler returned): nothing to do.
        if (!finishedWithin) await finishJob(db, job);
      } else {
        await rescheduleJob(db, job, next, { progressed: true });
        this.wake(next);
      }
    } catch (error) {
      this.options.onError?.(error, job);
      if (handler && job.attempts >= MAX_ATTEMPTS) {
        await handler.giveUp(job.subject_id, error).catch((e) => this.options.onError?.(e, job));
        await finishJob(db, job);
        return;
      }
      const delay = Math.min(MAX_BACKOFF_MS, 1_000 * 2 ** (job.attempts - 1));
      const retryAt = new Date(this.clock.now().getTime() + delay);
      await rescheduleJob(db, job, retryAt, { error: String(error), progressed: false });
      this.wake(retryAt);
    }
  }
}
