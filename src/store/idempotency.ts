import type { Selectable } from 'kysely';
import type { Executor, IdempotencyKeysTable } from './schema.js';

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

export async function completeIdempotencyKey(
  db: Executor,
  accountId: string,
  key: string,
  status: number,
  body: string,
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ state: 'completed', response_status: status, response_body: body })
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .execute();
}

export async function releaseIdempotencyKey(db: Executor, accountId: string, key: string): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .execute();
}

export async function purgeExpiredIdempotencyKeys(db: Executor, now: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).execute();
}
