import type { PageRequest } from '../../platform/domain/pagination.js';
import { fetchPage } from '../../platform/store/lists.js';
import type { Executor, SshKeyRow } from '../../platform/store/schema.js';

export interface SshKeyFilters {
  name?: string | undefined;
}

export async function insertSshKey(db: Executor, row: SshKeyRow): Promise<void> {
  await db.insertInto('ssh_keys').values(row).execute();
}

export function findSshKey(db: Executor, accountId: string, id: string): Promise<SshKeyRow | undefined> {
  return db
    .selectFrom('ssh_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The account's key with this name or this fingerprint, if any (what a new key would collide with). */
export function findSshKeyByNameOrFingerprint(
  db: Executor,
  accountId: string,
  name: string,
  fingerprint: string,
): Promise<SshKeyRow[]> {
  return db
    .selectFrom('ssh_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('name', '=', name), eb('fingerprint', '=', fingerprint)]))
    .execute();
}

/** The account's keys whose id or name is one of `refs`. */
export function findSshKeysByRefs(
  db: Executor,
  accountId: string,
  refs: readonly string[],
): Promise<Pick<SshKeyRow, 'id' | 'name'>[]> {
  if (refs.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('ssh_keys')
    .select(['id', 'name'])
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('id', 'in', refs), eb('name', 'in', refs)]))
    .execute();
}

export function listSshKeys(db: Executor, accountId: string, request: PageRequest, filters: SshKeyFilters) {
  let query = db.selectFrom('ssh_keys').selectAll().where('account_id', '=', accountId);
  if (filters.name !== undefined) query = query.where('name', '=', filters.name);
  return fetchPage(query, request);
}

export function deleteSshKey(db: Executor, accountId: string, id: string): Promise<SshKeyRow | undefined> {
  return db
    .deleteFrom('ssh_keys')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}
