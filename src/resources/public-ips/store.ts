/**
 * Public IPs: the `public_ips` table (migration 0021), one row per address an account holds. The
 * columns are the record's fields (platform/store/record-table.ts); tags are JSON text. The unique
 * constraints on (region, address) and on instance_id are the last guard behind the allocation and the
 * one-per-instance rule.
 */
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { fetchPage } from '../../platform/store/lists.js';
import { booleanInteger, jsonText, type RowFor, recordTable } from '../../platform/store/record-table.js';
import type { Executor } from '../../platform/store/schema.js';
import { type PublicIp, PublicIpRecord, type PublicIpSort } from './record.js';

const codecs = {
  tags: jsonText<PublicIp['tags']>(),
  auto_delete: booleanInteger,
  protection: jsonText<PublicIp['protection']>(),
};

export type PublicIpsTable = RowFor<PublicIp, typeof codecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    public_ips: PublicIpsTable;
  }
}

const table = recordTable({ table: 'public_ips', record: PublicIpRecord, codecs });

export const insertPublicIp = table.insert;
export const findAccountPublicIp = table.findOwned;
export const lockAccountPublicIp = table.lock;
export const updatePublicIp = table.update;
export const deletePublicIp = table.delete;

/** The address assigned to an instance, if any (an instance holds at most one). */
export async function publicIpOfInstance(db: Executor, instanceId: string): Promise<PublicIp | undefined> {
  const row = await db
    .selectFrom('public_ips')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .executeTakeFirst();
  return row ? table.decode(row) : undefined;
}

export interface PublicIpFilters {
  region?: string | undefined;
  name?: string | undefined;
  instance_id?: string | undefined;
  assigned?: boolean | undefined;
}

export async function listPublicIps(
  db: Executor,
  accountId: string,
  filters: PublicIpFilters,
  request: PageRequest<PublicIpSort>,
): Promise<Page<PublicIp>> {
  let query = db.selectFrom('public_ips').selectAll().where('account_id', '=', accountId);
  if (filters.region !== undefined) query = query.where('region', '=', filters.region);
  if (filters.name !== undefined) query = query.where('name', '=', filters.name);
  if (filters.instance_id !== undefined) query = query.where('instance_id', '=', filters.instance_id);
  if (filters.assigned !== undefined) {
    query = query.where('instance_id', filters.assigned ? 'is not' : 'is', null);
  }
  const page = await fetchPage(query, request);
  return { items: page.items.map(table.decode), pagination: page.pagination };
}

/** What the `public_ips` quota counts: the addresses the account keeps (not those that go with an instance). */
export async function countKeptPublicIps(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('public_ips')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', accountId)
    .where('auto_delete', '=', 0)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
