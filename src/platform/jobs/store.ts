/** The durable jobs table: enqueue by key, claim due jobs under a lease, and settle them. */
import { sql } from 'kysely';
import { compiledOnce, compiledPerShape } from '../store/compiled-query.js';
import type { Store } from '../store/db.js';
import { isPostgres } from '../store/dialect.js';
import type { Database, Executor, JobRow } from '../store/schema.js';

export interface JobRequest {
  id: string;
  key: string;
  kind: string;
  subjectId: string;
  runAt: Date;
  now: Date;
}

const upsert = compiledOnce<
  Database,
  { id: string; key: string; kind: string; subjectId: string; runAt: string; now: string },
  never
>((db, p) =>
  db
    .insertInto('jobs')
    .values({
      id: p.id,
      key: p.key,
      kind: p.kind,
      subject_id: p.subjectId,
      run_at: p.runAt,
      attempts: 0,
      version: 1,
      lease_owner: null,
      lease_until: null,
      last_error: null,
      created_at: p.now,
    })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        run_at: p.runAt,
        attempts: 0,
        version: sql<number>`jobs.version + 1`,
        last_error: null,
      }),
    ),
);

/** Inserts the job, or if one with this key exists, moves it to `runAt` and bumps its version. */
export async function upsertJob(db: Executor, job: JobRequest): Promise<void> {
  await upsert.write(db, {
    id: job.id,
    key: job.key,
    kind: job.kind,
    subjectId: job.subjectId,
    runAt: job.runAt.toISOString(),
    now: job.now.toISOString(),
  });
}

const dueJobs = compiledOnce<Database, { now: string; limit: number }, { id: string }>((db, p) =>
  db
    .selectFrom('jobs')
    .select('id')
    .where('run_at', '<=', p.now)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', p.now)]))
    .orderBy('run_at')
    .limit(p.limit),
);

/** The lease on the jobs found due, one compiled statement per number of jobs. */
const lease = compiledPerShape<Database, Record<string, string>, JobRow>((shape) => (db, p) => {
  const ids = Array.from({ length: Number(shape) }, (_, i) => p[`id${i}`] as string);
  return db
    .updateTable('jobs')
    .set({ lease_owner: p.owner, lease_until: p.leaseUntil, attempts: sql<number>`attempts + 1` })
    .where('id', 'in', ids)
    .returningAll();
});

/**
 * PostgreSQL's claim in one statement, outside any transaction: the due jobs are picked and locked with
 * FOR UPDATE SKIP LOCKED in the subquery and leased by the UPDATE around it, atomically, so it needs no
 * BEGIN and COMMIT of its own. One round trip instead of four (an empty poll: one instead of three).
 */
const claimOnPostgres = compiledOnce<
  Database,
  { owner: string; leaseUntil: string; now: string; limit: number },
  JobRow
>((db, p) =>
  db
    .updateTable('jobs')
    .set({ lease_owner: p.owner, lease_until: p.leaseUntil, attempts: sql<number>`attempts + 1` })
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('jobs')
        .select('id')
        .where('run_at', '<=', p.now)
        .where((inner) => inner.or([inner('lease_until', 'is', null), inner('lease_until', '<', p.now)]))
        .orderBy('run_at')
        .limit(p.limit)
        .forUpdate()
        .skipLocked(),
    )
    .returningAll(),
);

/**
 * Leases up to `limit` due jobs to `owner`. A job is due when its run_at has passed and nobody holds a
 * live lease on it. On PostgreSQL, FOR UPDATE SKIP LOCKED lets replicas claim side by side without ever
 * taking the same job (a row another claim changed meanwhile is checked again once locked, and a leased
 * one is no longer due); SQLite runs one write transaction at a time, which gives the same guarantee.
 */
export async function claimDueJobs(
  store: Store,
  owner: string,
  now: Date,
  leaseUntil: Date,
  limit: number,
): Promise<JobRow[]> {
  const nowText = now.toISOString();
  if (isPostgres(store.background)) {
    return claimOnPostgres.execute(store.background, {
      owner,
      leaseUntil: leaseUntil.toISOString(),
      now: nowText,
      limit,
    });
  }
  return store.background.transaction().execute(async (trx) => {
    const ids = (await dueJobs.execute(trx, { now: nowText, limit })).map((row) => row.id);
    if (ids.length === 0) return [];
    const values: Record<string, string> = { owner, leaseUntil: leaseUntil.toISOString() };
    ids.forEach((id, i) => {
      values[`id${i}`] = id;
    });
    return lease(String(ids.length)).execute(trx, values);
  });
}

const deleteFinished = compiledOnce<Database, { id: string; version: number; owner: string | null }, never>(
  (db, p) =>
    db
      .deleteFrom('jobs')
      .where('id', '=', p.id)
      .where('version', '=', p.version)
      .where('lease_owner', '=', p.owner),
);

/**
 * PostgreSQL's `finishJob` in one statement: the delete, or when it found nothing (the job was enqueued
 * again while it ran) the lease's release. The UPDATE sees the row as it was before the statement, so it
 * runs only when the DELETE deleted nothing, and the two never touch one row. Nothing is read back, so in a
 * transaction it is written behind (compiled-query.ts `write`): a settle's finish costs no round trip.
 */
const finishOnPostgres = compiledOnce<Database, { id: string; version: number; owner: string | null }, never>(
  (db, p) =>
    db
      .with('deleted', (w) =>
        w
          .deleteFrom('jobs')
          .where('id', '=', p.id)
          .where('version', '=', p.version)
          .where('lease_owner', '=', p.owner)
          .returning('id'),
      )
      .updateTable('jobs')
      .set({ lease_owner: null, lease_until: null })
      .where('id', '=', p.id)
      .where('lease_owner', '=', p.owner)
      .where((eb) => eb.not(eb.exists(eb.selectFrom('deleted').select('id')))),
);

/** Removes a finished job, unless it was enqueued again while it ran: then only the lease goes. */
export async function finishJob(db: Executor, job: JobRow): Promise<void> {
  if (isPostgres(db)) {
    await finishOnPostgres.write(db, { id: job.id, version: job.version, owner: job.lease_owner });
    return;
  }
  const deleted = await deleteFinished.run(db, { id: job.id, version: job.version, owner: job.lease_owner });
  if (deleted.numAffectedRows === 0n) await releaseJob(db, job);
}

type Reschedule = {
  id: string;
  version: number;
  owner: string | null;
  runAt: string;
  error: string | null;
};

/** The job's next run; `progressed` also starts its count of failed attempts again. */
const reschedule = compiledPerShape<Database, Reschedule, never>(
  (shape) => (db, p) =>
    db
      .updateTable('jobs')
      .set({
        run_at: p.runAt,
        lease_owner: null,
        lease_until: null,
        last_error: p.error,
        ...(shape === 'progressed' ? { attempts: 0 } : {}),
      })
      .where('id', '=', p.id)
      .where('version', '=', p.version)
      .where('lease_owner', '=', p.owner),
);

/** Sets the job to run again at `runAt` (kept earlier if it was enqueued again meanwhile) and drops the lease. */
export async function rescheduleJob(
  db: Executor,
  job: JobRow,
  runAt: Date,
  outcome: { error?: string; progressed: boolean },
): Promise<void> {
  const updated = await reschedule(outcome.progressed ? 'progressed' : 'failed').run(db, {
    id: job.id,
    version: job.version,
    owner: job.lease_owner,
    runAt: runAt.toISOString(),
    error: outcome.error ?? null,
  });
  if (updated.numAffectedRows === 0n) await releaseJob(db, job);
}

const release = compiledOnce<Database, { id: string; owner: string | null }, never>((db, p) =>
  db
    .updateTable('jobs')
    .set({ lease_owner: null, lease_until: null })
    .where('id', '=', p.id)
    .where('lease_owner', '=', p.owner),
);

async function releaseJob(db: Executor, job: JobRow): Promise<void> {
  await release.run(db, { id: job.id, owner: job.lease_owner });
}
