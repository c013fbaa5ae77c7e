/** The durable jobs table: enqueue by key, claim due jobs under a lease, and settle them. */
import { sql } from 'kysely';
import type { Store } from './db.js';
import { isPostgres } from './dialect.js';
import type { Executor, JobRow } from './schema.js';

export interface JobRequest {
  id: string;
  key: string;
  kind: string;
  subjectId: string;
  runAt: Date;
  now: Date;
}

/** Inserts the job, or if one with this key exists, moves it to `runAt` and bumps its version. */
export async function upsertJob(db: Executor, job: JobRequest): Promise<void> {
  await db
    .insertInto('jobs')
    .values({
      id: job.id,
      key: job.key,
      kind: job.kind,
      subject_id: job.subjectId,
      run_at: job.runAt.toISOString(),
      attempts: 0,
      version: 1,
      lease_owner: null,
      lease_until: null,
      last_error: null,
      created_at: job.now.toISOString(),
    })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        run_at: job.runAt.toISOString(),
        attempts: 0,
        version: sql<number>`jobs.version + 1`,
        last_error: null,
      }),
    )
    .execute();
}

/**
 * Leases up to `limit` due jobs to `owner`. A job is due when its run_at has passed and nobody holds a
 * live lease on it. On PostgreSQL, FOR UPDATE SKIP LOCKED lets replicas claim side by side without ever
 * taking the same job; SQLite runs one write transaction at a time, which gives the same guarantee.
 */
export async function claimDueJobs(
  store: Store,
  owner: string,
  now: Date,
  leaseUntil: Date,
  limit: number,
): Promise<JobRow[]> {
  const nowText = now.toISOString();
  return store.db.transaction().execute(async (trx) => {
    let due = trx
      .selectFrom('jobs')
      .select('id')
      .where('run_at', '<=', nowText)
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', nowText)]))
      .orderBy('run_at')
      .limit(limit);
    if (isPostgres(trx)) due = due.forUpdate().skipLocked();
    const ids = (await due.execute()).map((row) => row.id);
    if (ids.length === 0) return [];
    return trx
      .updateTable('jobs')
      .set({
        lease_owner: owner,
        lease_until: leaseUntil.toISOString(),
        attempts: sql<number>`attempts + 1`,
      })
      .where('id', 'in', ids)
      .returningAll()
      .execute();
  });
}

/** Removes a finished job, unless it was enqueued again while it ran: then only the lease goes. */
export async function finishJob(db: Executor, job: JobRow): Promise<void> {
  const deleted = await db
    .deleteFrom('jobs')
    .where('id', '=', job.id)
    .where('version', '=', job.version)
    .where('lease_owner', '=', job.lease_owner)
    .executeTakeFirst();
  if (deleted.numDeletedRows === 0n) await releaseJob(db, job);
}

/** Sets the job to run again at `runAt` (kept earlier if it was enqueued again meanwhile) and drops the lease. */
export async function rescheduleJob(
  db: Executor,
  job: JobRow,
  runAt: Date,
  outcome: { error?: string; progressed: boolean },
): Promise<void> {
  const updated = await db
    .updateTable('jobs')
    .set({
      run_at: runAt.toISOString(),
      lease_owner: null,
      lease_until: null,
      last_error: outcome.error ?? null,
      ...(outcome.progressed ? { attempts: 0 } : {}),
    })
    .where('id', '=', job.id)
    .where('version', '=', job.version)
    .where('lease_owner', '=', job.lease_owner)
    .executeTakeFirst();
  if (updated.numUpdatedRows === 0n) await releaseJob(db, job);
}

async function releaseJob(db: Executor, job: JobRow): Promise<void> {
  await db
    .updateTable('jobs')
    .set({ lease_owner: null, lease_until: null })
    .where('id', '=', job.id)
    .where('lease_owner', '=', job.lease_owner)
    .execute();
}
