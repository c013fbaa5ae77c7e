/**
 * Public IPv4 addresses of a region: instances hold most of them, VPN gateways and the routers of VPCs on
 * the public link the rest (address-holds.ts), and no address is
 * ever held twice. All take them from one address scope per region (resources/addresses/address-store.ts), which reads the
 * addresses the three tables hold only when it is set up; the unique constraints of each table stay as the
 * last guard.
 */

import type { Executor } from '../../platform/store/schema.js';
import { type AddressScope, publicScopeKey } from './address-store.js';
import type { Cidr } from './addresses.js';

export function publicAddressScope(region: string, block: Cidr): AddressScope {
  return { key: publicScopeKey(region), block, inUse: (db) => publicIpsInUse(db, region) };
}

export async function publicIpsInUse(db: Executor, region: string): Promise<string[]> {
  const rows = await db
    .selectFrom('instances')
    .select('public_ip as ip')
    .where('region', '=', region)
    .unionAll(db.selectFrom('vpns').select('endpoint_ip as ip').where('region', '=', region))
    .unionAll(db.selectFrom('public_address_holds').select('ip').where('region', '=', region))
    .execute();
  return rows.map((row) => row.ip);
}
