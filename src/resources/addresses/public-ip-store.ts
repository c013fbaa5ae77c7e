/**
 * Public IPv4 addresses of a region: public IPs hold most of them (the one an instance has is a public IP
 * too, and `instances.public_ip` names it while assigned), VPN gateways and the routers of VPCs on the
 * public link the rest (address-holds.ts), and no address is ever held twice. All take them from one
 * address scope per region (resources/addresses/address-store.ts), which reads the addresses held only
 * when it is set up; the unique constraints of each table stay as the last guard.
 *
 * A released public IP does not go back to the pool at once: `released_addresses` keeps it out until
 * `reusable_at` (24 h later), so an address a user let go cannot reach someone else while clients,
 * caches and DNS still point at it. A take that finds the pool empty gives the due ones back first.
 */
import type { Executor } from '../../platform/store/schema.js';
import { type AddressScope, publicScopeKey, returnAddress, takeAddress } from './address-store.js';
import { type Cidr, intToIp, ipToInt } from './addresses.js';

interface ReleasedAddressesTable {
  scope: string;
  ip: number;
  reusable_at: string;
}
declare module '../../platform/store/schema.js' {
  interface Database {
    released_addresses: ReleasedAddressesTable;
  }
}

export function publicAddressScope(region: string, block: Cidr): AddressScope {
  return { key: publicScopeKey(region), block, inUse: (db) => publicIpsInUse(db, region) };
}

export async function publicIpsInUse(db: Executor, region: string): Promise<string[]> {
  const rows = await db
    .selectFrom('instances')
    .select('public_ip as ip')
    .where('region', '=', region)
    .where('public_ip', 'is not', null)
    .unionAll(db.selectFrom('vpns').select('endpoint_ip as ip').where('region', '=', region))
    .unionAll(db.selectFrom('public_address_holds').select('ip').where('region', '=', region))
    .unionAll(db.selectFrom('public_ips').select('address as ip').where('region', '=', region))
    .execute();
  const cooling = await db
    .selectFrom('released_addresses')
    .select('ip')
    .where('scope', '=', publicScopeKey(region))
    .execute();
  return [
    ...rows.flatMap((row) => (row.ip === null ? [] : [row.ip])),
    ...cooling.map((row) => intToIp(Number(row.ip))),
  ];
}

/**
 * A public address from the region's pool, in the caller's transaction. Released addresses whose 24 h
 * are up go back only when the pool has nothing else: the usual take costs no extra statement, and an
 * address stays unused for as long as the pool allows.
 */
export async function takePublicAddress(
  trx: Executor,
  scope: AddressScope,
  now: Date,
): Promise<string | null> {
  const taken = await takeAddress(trx, scope);
  if (taken !== null) return taken;
  const due = await trx
    .deleteFrom('released_addresses')
    .where('scope', '=', scope.key)
    .where('reusable_at', '<=', now.toISOString())
    .returning('ip')
    .execute();
  if (due.length === 0) return null;
  for (const { ip } of due) await returnAddress(trx, scope.key, intToIp(Number(ip)));
  return takeAddress(trx, scope);
}

/** Keeps a released address out of the region's pool until `reusable_at` (its holder's row goes in this transaction). */
export async function releasePublicAddress(
  db: Executor,
  region: string,
  address: string,
  reusableAt: Date,
): Promise<void> {
  await db
    .insertInto('released_addresses')
    .values({ scope: publicScopeKey(region), ip: ipToInt(address), reusable_at: reusableAt.toISOString() })
    .onConflict((oc) => oc.columns(['scope', 'ip']).doUpdateSet({ reusable_at: reusableAt.toISOString() }))
    .execute();
}
