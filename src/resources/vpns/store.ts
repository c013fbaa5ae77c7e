/**
 * VPNs and their peers. Every write that changes a VPN goes through `updateVpn`, which guards on the
 * version the caller read; peers are written while their VPN is held (resources/vpns/service.ts), and their
 * addresses and keys are unique per VPN in the schema too. Callers see `Vpn` and `VpnPeer` records
 * (resources/vpns/record.ts), whose fields are the columns (platform/store/record-table.ts): JSON text and
 * 0/1 stay in this module.
 */
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { fetchPage } from '../../platform/store/lists.js';
import {
  booleanInteger,
  jsonText,
  type RowFor,
  recordRows,
  recordTable,
} from '../../platform/store/record-table.js';
import type { Executor } from '../../platform/store/schema.js';
import { publicScopeKey, returnAddress } from '../addresses/address-store.js';
import {
  type PeerSort,
  type Vpn,
  type VpnChanges,
  type VpnPeer,
  VpnPeerRecord,
  VpnRecord,
  type VpnSort,
} from './record.js';

/** The vpns table; the extra routes are JSON text. */
/** Allowed CIDRs are kept as JSON text; every other field is its own column. */
const codecs = { allowed_cidrs: jsonText<string[]>() };
/** A peer's "the server made its key" is 0/1. */
const peerCodecs = { key_generated: booleanInteger };

/** The vpns table and its peers' table: the records' fields as columns. */
export type VpnsTable = RowFor<Vpn, typeof codecs>;
export type VpnPeersTable = RowFor<VpnPeer, typeof peerCodecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    vpns: VpnsTable;
    vpn_peers: VpnPeersTable;
  }
}

const table = recordTable({ table: 'vpns', record: VpnRecord, codecs });
const peers = recordRows({ table: 'vpn_peers', record: VpnPeerRecord, codecs: peerCodecs });

export const insertVpn = table.insert;
export const findVpn = table.find;
export const findAccountVpn = table.findOwned;
export const lockAccountVpn = table.lock;
/** Applies `changes` if the VPN is still at the version read; undefined when another writer won. */
export const updateVpn: (db: Executor, current: Vpn, changes: VpnChanges) => Promise<Vpn | undefined> =
  table.update;

/** Deletes the VPN and its peers if it is still at the version read; false otherwise. */
export async function deleteVpn(db: Executor, current: Vpn): Promise<boolean> {
  if (!(await table.delete(db, current))) return false;
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
  return { items: page.items.map(table.decode), pagination: page.pagination };
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
    .values(peers.encode(peer) as VpnPeersTable)
    .execute();
}

export async function findPeer(db: Executor, vpnId: string, peerId: string): Promise<VpnPeer | undefined> {
  const row = await db
    .selectFrom('vpn_peers')
    .selectAll()
    .where('vpn_id', '=', vpnId)
    .where('id', '=', peerId)
    .executeTakeFirst();
  return row && peers.decode(row);
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
  return rows.map(peers.decode);
}

export async function listPeers(
  db: Executor,
  vpnId: string,
  request: PageRequest<PeerSort>,
): Promise<Page<VpnPeer>> {
  const page = await fetchPage(db.selectFrom('vpn_peers').selectAll().where('vpn_id', '=', vpnId), request);
  return { items: page.items.map(peers.decode), pagination: page.pagination };
}

/** One VPN's sealed private key, for checking a master key against the store; none: undefined. */
export async function anySealedKey(
  db: Executor,
): Promise<{ id: string; server_private_key_sealed: string } | undefined> {
  return db.selectFrom('vpns').select(['id', 'server_private_key_sealed']).limit(1).executeTakeFirst();
}

/** What the network needs of the VPNs of an account (or of every account, null): their gateways join its VPCs. */
export async function vpnsForNetwork(
  db: Executor,
  accountId: string | null,
): Promise<{ id: string; account_id: string; region: string; tunnel_cidr: string; endpoint_ip: string }[]> {
  let query = db.selectFrom('vpns').select(['id', 'account_id', 'region', 'tunnel_cidr', 'endpoint_ip']);
  if (accountId !== null) query = query.where('account_id', '=', accountId);
  return query.orderBy('id').execute();
}
