/**
 * Public addresses held by neither an instance nor a VPN gateway (table `public_address_holds`): with
 * NIMBUS_PUBLIC_UPLINK, each VPC's router port on the public link, and the upstream router when
 * NIMBUS_PUBLIC_GATEWAY is an address the pool would otherwise hand out. They are part of the region's
 * address scope (publicIpsInUse reads them), so no instance or gateway is ever given one.
 *
 * A router's address is taken like an instance's (takeAddress, lowest free) and given back when its VPC
 * goes (the account's last instance in the region). The gateway is a fixed address: holding it sets the
 * scope up again from the rows in use, which now include it, so a later take skips it.
 */
import type { Kysely } from 'kysely';
import type { Database, Executor } from '../../platform/store/schema.js';
import { publicScopeKey, returnAddress, takeAddress } from './address-store.js';
import { type Cidr, ipToInt } from './addresses.js';
import { publicAddressScope } from './public-ip-store.js';

export const routerHolder = (accountId: string) => `router:${accountId}`;
export const GATEWAY_HOLDER = 'gateway';

export interface RouterAddress {
  accountId: string;
  region: string;
  ip: string;
}

/** The router addresses held, of one account or of all. */
export async function routerAddresses(db: Executor, accountId: string | null): Promise<RouterAddress[]> {
  const query = db.selectFrom('public_address_holds').select(['region', 'ip', 'holder']);
  const rows = await (accountId === null
    ? query.where('holder', 'like', 'router:%')
    : query.where('holder', '=', routerHolder(accountId))
  ).execute();
  return rows.map((row) => ({
    accountId: row.holder.slice('router:'.length),
    region: row.region,
    ip: row.ip,
  }));
}

/**
 * The address of the account's router on the region's public link: the one it holds, or the lowest free
 * of the pool, held from now on; null when it holds none and the pool is full.
 */
export async function holdRouterAddress(
  db: Kysely<Database>,
  accountId: string,
  region: string,
  block: Cidr,
  now: string,
): Promise<string | null> {
  return db.transaction().execute(async (trx) => {
    const held = await trx
      .selectFrom('public_address_holds')
      .select('ip')
      .where('region', '=', region)
      .where('holder', '=', routerHolder(accountId))
      .executeTakeFirst();
    if (held) return held.ip;
    const ip = await takeAddress(trx, publicAddressScope(region, block));
    if (ip === null) return null;
    await trx
      .insertInto('public_address_holds')
      .values({ region, ip, holder: routerHolder(accountId), created_at: now })
      .execute();
    return ip;
  });
}

/** Gives the account's router address in the region back to the pool; nothing held is fine. */
export async function releaseRouterAddress(
  db: Kysely<Database>,
  accountId: string,
  region: string,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const held = await trx
      .deleteFrom('public_address_holds')
      .where('region', '=', region)
      .where('holder', '=', routerHolder(accountId))
      .returning('ip')
      .executeTakeFirst();
    if (held) await returnAddress(trx, publicScopeKey(region), held.ip);
  });
}

/**
 * Holds `ip` as the region's upstream router, or holds nothing when the pool never hands it out (below
 * its first assignable address: the default, the pool's first address). Refuses an address an instance,
 * a VPN gateway or a router holds, naming it.
 */
export async function holdGatewayAddress(
  db: Kysely<Database>,
  region: string,
  ip: string,
  block: Cidr,
  now: string,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const current = await trx
      .selectFrom('public_address_holds')
      .select('ip')
      .where('region', '=', region)
      .where('holder', '=', GATEWAY_HOLDER)
      .executeTakeFirst();
    if (current?.ip === ip) return;
    const assignable = ipToInt(ip) >= block.first && ipToInt(ip) <= block.last;
    if (current) {
      await trx
        .deleteFrom('public_address_holds')
        .where('region', '=', region)
        .where('holder', '=', GATEWAY_HOLDER)
        .execute();
      await returnAddress(trx, publicScopeKey(region), current.ip);
    }
    if (!assignable) return;
    const holder = await holderOf(trx, region, ip);
    if (holder !== null) {
      throw new Error(`NIMBUS_PUBLIC_GATEWAY ${ip} is held by ${holder} in ${region}; name another address`);
    }
    await trx
      .insertInto('public_address_holds')
      .values({ region, ip, holder: GATEWAY_HOLDER, created_at: now })
      .execute();
    // The scope is set up again on its next take, from the rows in use, which now include the gateway.
    await trx.deleteFrom('address_pools').where('scope', '=', publicScopeKey(region)).execute();
  });
}

async function holderOf(db: Executor, region: string, ip: string): Promise<string | null> {
  const instance = await db
    .selectFrom('instances')
    .select('id')
    .where('region', '=', region)
    .where('public_ip', '=', ip)
    .executeTakeFirst();
  if (instance) return `instance ${instance.id}`;
  const vpn = await db
    .selectFrom('vpns')
    .select('id')
    .where('region', '=', region)
    .where('endpoint_ip', '=', ip)
    .executeTakeFirst();
  if (vpn) return `VPN gateway ${vpn.id}`;
  const held = await db
    .selectFrom('public_address_holds')
    .select('holder')
    .where('region', '=', region)
    .where('ip', '=', ip)
    .executeTakeFirst();
  return held ? held.holder : null;
}
