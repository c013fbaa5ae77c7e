import type { Selectable } from 'kysely';
import type { Executor, IdempotencyKeysTable } from '../store/schema.js';

export type IdempotencyRecord = Selectable<IdempotencyKeysTable>;

/** True when this call created the record (and so owns the request). */
export async function claimIdempotencyKey(db: Executor, record: IdempotencyRecord): Promise<boolean> {
  const result = await db
    .insertInto('idempotency_keys')
    .values(record)
    .onConflict((oc) => oc.columns(['account_id', 'key']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export function findIdempotencyKey(
  db: Executor,
  accountId: string,
  key: string,
): Promise<IdempotencyRecord | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .executeTakeFirst();
}

/**
 * Takes over a record whose owner is gone: it expired, or it is in progress with a lapsed lease (the
 * process that held it crashed). The WHERE clause makes the takeover a compare-and-set.
 */
export async function takeOverIdempotencyKey(
  db: Executor,
  record: IdempotencyRecord,
  now: string,
): Promise<boolean> {
  const result = await db
    .updateTable('idempotency_keys')
    .set(record)
    .where('account_id', '=', record.account_id)
    .where('key', '=', record.key)
    .where((eb) =>
      eb.or([
        eb('expires_at', '<=', now),
        eb.and([eb('state', '=', 'in_progress'), eb('locked_until', '<=', now)]),
      ]),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The request holding a key: the account's key and the claim that took it. */
export interface IdempotencyClaim {
  accountId: string;
  key: string;
  claimedBy: string;
}

/**
 * Inside a create's transaction: the claim's key now answers with `made` (committed with it, or rolled
 * back with it). False when the claim no longer holds the key in progress (its lease lapsed and another
 * request took it over), so the caller can refuse to commit a second create.
 */
export async function markIdempotencyKeyCommitted(
  trx: Executor,
  claim: IdempotencyClaim,
  made: { status: number; kind: string; id: string },
): Promise<boolean> {
  const result = await trx
    .updateTable('idempotency_keys')
    .set({ state: 'committed', response_status: made.status, resource_kind: made.kind, resource_id: made.id })
    .where('account_id', '=', claim.accountId)
    .where('key', '=', claim.key)
    .where('claimed_by', '=', claim.claimedBy)
    .where('state', '=', 'in_progress')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Saves the claim's answer. A committed create keeps its record of what it made unless the answer is a
 * success: a later failure (the view read after the COMMIT) must not turn a done create into a saved error.
 */
export async function completeIdempotencyKey(
  db: Executor,
  claim: IdempotencyClaim,
  status: number,
  body: string,
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ state: 'completed', response_status: status, response_body: body })
    .where('account_id', '=', claim.accountId)
    .where('key', '=', claim.key)
    .where('claimed_by', '=', claim.claimedBy)
    .where('state', 'in', status < 400 ? ['in_progress', 'committed'] : ['in_progress'])
    .execute();
}

/** Frees the claim's key for a retry, unless the create committed (a retry then replays it). */
export async function releaseIdempotencyKey(db: Executor, claim: IdempotencyClaim): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', claim.accountId)
    .where('key', '=', claim.key)
    .where('claimed_by', '=', claim.claimedBy)
    .where('state', '=', 'in_progress')
    .execute();
}

export async function purgeExpiredIdempotencyKeys(db: Executor, now: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).execute();
}
