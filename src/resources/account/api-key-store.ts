import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { fetchPage } from '../../platform/store/lists.js';
import type { AccountRow, ApiKeyRow, Executor } from '../../platform/store/schema.js';
import type { ApiKey } from './api-key-record.js';

/** An API key as services see it: declared once, as a TypeBox record (api-key-record.ts). */
export type { ApiKey };

const fromRow = (row: ApiKeyRow): ApiKey => ({
  ...row,
  permissions: JSON.parse(row.permissions) as string[],
});

export async function insertApiKey(db: Executor, key: ApiKey): Promise<void> {
  await db
    .insertInto('api_keys')
    .values({ ...key, permissions: JSON.stringify(key.permissions) })
    .execute();
}

export interface KeyWithAccount {
  key: ApiKey;
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
  return account ? { key: fromRow(key), account } : undefined;
}

export async function findApiKey(db: Executor, accountId: string, id: string): Promise<ApiKey | undefined> {
  const row = await db
    .selectFrom('api_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && fromRow(row);
}

export async function listApiKeys(
  db: Executor,
  accountId: string,
  request: PageRequest,
): Promise<Page<ApiKey>> {
  const page = await fetchPage(
    db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId),
    request,
    // A key never used has no last_used_at: it sorts as the oldest use.
    { nullableSorts: ['last_used_at'] },
  );
  return { items: page.items.map(fromRow), pagination: page.pagination };
}

export async function countApiKeys(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function deleteApiKey(db: Executor, accountId: string, id: string): Promise<ApiKey | undefined> {
  const row = await db
    .deleteFrom('api_keys')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && fromRow(row);
}

export async function touchApiKeys(db: Executor, ids: readonly string[], at: string): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', 'in', ids).execute();
}
