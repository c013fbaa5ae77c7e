import type { PageRequest } from '../domain/pagination.js';
import { fetchPage } from './lists.js';
import type { AccountRow, ApiKeyRow, Executor } from './schema.js';

export async function insertApiKey(db: Executor, row: ApiKeyRow): Promise<void> {
  await db.insertInto('api_keys').values(row).execute();
}

export interface KeyWithAccount {
  key: ApiKeyRow;
  account: AccountRow;
}

export async function findKeyWithAccountByHash(
  db: Executor,
  keyHash: string,
): Promise<KeyWithAccount | undefined> {
  const key = await db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst();
  if (!key) return undefined;
  const account = await db
    .selectFrom('accounts')
    .selectAll()
    .where('id', '=', key.account_id)
    .executeTakeFirst();
  return account ? { key, account } : undefined;
}

export function findApiKey(db: Executor, accountId: string, id: string): Promise<ApiKeyRow | undefined> {
  return db
    .selectFrom('api_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export function listApiKeys(db: Executor, accountId: string, request: PageRequest) {
  return fetchPage(db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId), request);
}

export async function countApiKeys(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function deleteApiKey(
  db: Executor,
  accountId: string,
  id: string,
): Promise<ApiKeyRow | undefined> {
  return db
    .deleteFrom('api_keys')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function touchApiKeys(db: Executor, ids: readonly string[], at: string): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', 'in', ids).execute();
}
