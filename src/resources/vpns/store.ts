/**
 * VPNs and their peers. Every write that changes a VPN goes through `updateVpn`, which guards on the
 * version the caller read; peers are written while their VPN is held (resources/vpns/service.ts), and their
 * addresses and keys are unique per VPN in the schema too. Callers see `Vpn` and `VpnPeer` records
 * (resources/vpns/record.ts): JSON text and 0/1 stay in this module.
 */
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import type { Executor, VpnPeerRow, VpnRow, VpnsTable } from '../../platform/store/schema.js';
import { publicScopeKey, returnAddress } from '../addresses/address-store.js';
import type { PeerSort, Vpn, VpnChanges, VpnPeer, VpnSort } from './record.js';
import type { VpnStatus } from './states.js';

function fromRow(row: VpnRow): Vpn {
  return {
    ...row,
    status: row.status as VpnStatus,
    allowed_cidrs: JSON.parse(row.allowed_cidrs) as string[],
  };
}

function peerFromRow(row: VpnPeerRow): VpnPeer {
  return { ...row, key_generated: row.key_generated === 1 };
}

function toColumns(changes: VpnChanges): Partial<VpnsTable> {
  const { allowed_cidrs, ...plain } = changes;
  return {
    ...plain,
    ...(allowed_cidrs !== undefined ? { allowed_cidrs: JSON.stringify(allowed_cidrs) } : {}),
  };
}

export async function insertVpn(db: Executor, vpn: Vpn): Promise<void> {
  await db
    .insertInto('vpns')
    .values({ ...vpn, allowed_cidrs: JSON.stringify(vpn.allowed_cidrs) })
    .execute();
}

export async function findVpn(db: Executor, id: string): Promise<Vpn | undefined> {
  const row = await db.selectFrom('vpns').selectAll().where('id', '=', id).executeTakeFirst();
  return row && fromRow(row);
}

export async function findAccountVpn(db: Executor, accountId: string, id: string): Promise<Vpn | undefined> {
  const row = await db
    .selectFrom('vpns')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row && fromRow(row);
}

/** Reads the account's VPN and holds it until the transaction ends (a row lock on PostgreSQL). */
export async function lockAccountVpn(db: Executor, accountId: string, id: string): Promise<Vpn | undefined> {
  let query = db.selectFrom('vpns').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (isPostgres(db)) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row && fromRow(row);
}

/** Applies `changes` if the VPN is still at the version read; undefined when another writer won. */
export async function updateVpn(db: Executor, current: Vpn, changes: VpnChanges): Promise<Vpn | undefined> {
  const row = await db
    .updateTable('vpns')
    .set({ ...toColumns(changes), version: current.version + 1 })
    .where('id', '=', current.id)
    .where('version', '=', current.version)
    .returningAll()
    .executeTakeFirst();
  return row && fromRow(row);
}

/** Deletes the VPN and its peers if it is still at the version read; false otherwise. */
export async function deleteVpn(db: Executor, current: Vpn): Promise<boolean> {
  const deleted = await db
    .deleteFrom('vpns')
    .where('id', '=', current.id)
    .where('version', '=', current.version)
    .executeTakeFirst();
  if (deleted.numDeletedRows === 0n) return false;
  await db.deleteFrom('vpn_peers').where('vpn_id', '=', current.id).execute();
  await returnAddress(db, publicScopeKey(current.region), current.endpoint_ip);
  return true;
}

export interface VpnFilters {
  status?: string | undefined;
  region?: string | undefined;
}

export async function listVpns(
  db: Executor,
  accountId: string,
  filters: VpnFilters,
  request: PageRequest<VpnSort>,
): Promise<Page<Vpn>> {
  let query = db.selectFrom('vpns').selectAll().where('account_id', '=', accountId);
  if (filters.status !== undefined) query = query.where('status', '=', filters.status);
  if (filters.region !== undefined) query = query.where('region', '=', filters.region);
  const page = await fetchPage(query, request);
  return { items: page.items.map(fromRow), pagination: page.pagination };
}

/** The account's VPNs, every status; the vpns quota counts these. */
export async function countVpns(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('vpns')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return Number(row?.count ?? 0);
}

export async function insertPeer(db: Executor, peer: VpnPeer): Promise<void> {
  await db
    .insertInto('vpn_peers')
    .values({ ...peer, key_generated: peer.key_generated ? 1 : 0 })
    .execute();
}

export async function findPeer(db: Executor, vpnId: string, peerId: string): Promise<VpnPeer | undefined> {
  const row = await db
    .selectFrom('vpn_peers')
    .selectAll()
    .where('vpn_id', '=', vpnId)
    .where('id', '=', peerId)
    .executeTakeFirst();
  return row && peerFromRow(row);
}

export async function deletePeer(db: Executor, vpnId: string, peerId: string): Promise<boolean> {
  const deleted = await db
    .deleteFrom('vpn_peers')
    .where('vpn_id', '=', vpnId)
    .where('id', '=', peerId)
    .executeTakeFirst();
  return deleted.numDeletedRows > 0n;
}

/** Every peer of the VPN (the gateway's configuration lists them all), oldest first. */
export async function peersOf(db: Executor, vpnId: string): Promise<VpnPeer[]> {
  const rows = await db
    .selectFrom('vpn_peers')
    .selectAll()
    .where('vpn_id', '=', vpnId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(peerFromRow);
}

export async function listPeers(
  db: Executor,
  vpnId: string,
  request: PageRequest<PeerSort>,
): Promise<Page<VpnPeer>> {
  const page = await fetchPage(db.selectFrom('vpn_peers').selectAll().where('vpn_id', '=', vpnId), request);
  return { items: page.items.map(peerFromRow), pagination: page.pagination };
}

/** One VPN's sealed private key, for checking a master key against the store; none: undefined. */
export async function anySealedKey(
  db: Executor,
): Promise<{ id: string; server_private_key_sealed: string } | undefined> {
  return db.selectFrom('vpns').select(['id', 'server_private_key_sealed']).limit(1).executeTakeFirst();
}
