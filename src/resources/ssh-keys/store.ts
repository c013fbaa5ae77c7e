/**
 * SSH keys. Callers see `SshKey` records (record.ts); every field is its own column, so the table is the
 * record's fields (platform/store/record-table.ts) and rows decode as they are.
 */
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { fetchPage } from '../../platform/store/lists.js';
import { type RowFor, recordRows } from '../../platform/store/record-table.js';
import type { Executor } from '../../platform/store/schema.js';
import { type SshKey, SshKeyRecord } from './record.js';

/** No field needs a codec: each is a plain column. */
const codecs = {};

/** The ssh_keys table: the record's fields as columns. */
export type SshKeysTable = RowFor<SshKey, typeof codecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    ssh_keys: SshKeysTable;
  }
}

const rows = recordRows({ table: 'ssh_keys', record: SshKeyRecord, codecs });

export interface SshKeyFilters {
  name?: string | undefined;
}

export async function insertSshKey(db: Executor, key: SshKey): Promise<void> {
  await db
    .insertInto('ssh_keys')
    .values(rows.encode(key) as SshKeysTable)
    .execute();
}

export async function findSshKey(db: Executor, accountId: string, id: string): Promise<SshKey | undefined> {
  const row = await db
    .selectFrom('ssh_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && rows.decode(row);
}

/** The account's key with this name or this fingerprint, if any (what a new key would collide with). */
export async function findSshKeyByNameOrFingerprint(
  db: Executor,
  accountId: string,
  name: string,
  fingerprint: string,
): Promise<SshKey[]> {
  const found = await db
    .selectFrom('ssh_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('name', '=', name), eb('fingerprint', '=', fingerprint)]))
    .execute();
  return found.map(rows.decode);
}

/** The account's keys whose id or name is one of `refs`. */
export function findSshKeysByRefs(
  db: Executor,
  accountId: string,
  refs: readonly string[],
): Promise<Pick<SshKey, 'id' | 'name'>[]> {
  if (refs.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('ssh_keys')
    .select(['id', 'name'])
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('id', 'in', refs), eb('name', 'in', refs)]))
    .execute();
}

export async function listSshKeys(
  db: Executor,
  accountId: string,
  request: PageRequest,
  filters: SshKeyFilters,
): Promise<Page<SshKey>> {
  let query = db.selectFrom('ssh_keys').selectAll().where('account_id', '=', accountId);
  if (filters.name !== undefined) query = query.where('name', '=', filters.name);
  const page = await fetchPage(query, request);
  return { items: page.items.map(rows.decode), pagination: page.pagination };
}

export async function deleteSshKey(db: Executor, accountId: string, id: string): Promise<SshKey | undefined> {
  const row = await db
    .deleteFrom('ssh_keys')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && rows.decode(row);
}
