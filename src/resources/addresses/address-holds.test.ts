/**
 * Router and gateway addresses on the public link (address-holds.ts) on a real store: a VPC's router
 * takes the lowest free address of the region's pool and keeps it, no later take hands it out, and it is
 * free again once released; a configured gateway the pool would hand out is held (taken out of the
 * scope), the default one (the pool's first address) needs nothing, and one already held is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from '../../../test/helpers/backends.js';
import { migrateToLatest, openStore, type Store } from '../../platform/store/db.js';
import { MIGRATIONS } from '../../resources.js';
import {
  holdGatewayAddress,
  holdRouterAddress,
  releaseRouterAddress,
  routerAddresses,
} from './address-holds.js';
import { takeAddress } from './address-store.js';
import { parseCidr } from './addresses.js';
import { publicAddressScope } from './public-ip-store.js';

describe.each(STORES)('public address holds (%s)', (kind) => {
  const backing = storeForSuite(kind, { dataDirPrefix: 'nimbus-address-holds-' });
  let store: Store;
  const now = '2026-11-28T00:00:00.000Z';
  const block = parseCidr('198.18.0.0/28');
  beforeAll(async () => {
    store = openStore({ dataDir: backing.dataDir, databaseUrl: backing.databaseUrl });
    await migrateToLatest(store.db, MIGRATIONS);
  });
  afterAll(async () => {
    await store.close();
  });

  let regions = 0;
  const freshRegion = () => `test-holds-${Date.now().toString(36)}-${++regions}`;
  const take = (region: string) =>
    store.db.transaction().execute((trx) => takeAddress(trx, publicAddressScope(region, block)));

  it("holds a router's address until released, and no take hands it out meanwhile", async () => {
    const region = freshRegion();
    const router = await holdRouterAddress(store.db, 'acct_holds1', region, block, now);
    expect(router).toBe('198.18.0.2');
    // Held already: the same address again.
    expect(await holdRouterAddress(store.db, 'acct_holds1', region, block, now)).toBe(router);
    expect(await routerAddresses(store.db, 'acct_holds1')).toEqual([
      { accountId: 'acct_holds1', region, ip: router },
    ]);
    expect(await take(region)).toBe('198.18.0.3');
    expect(await holdRouterAddress(store.db, 'acct_holds2', region, block, now)).toBe('198.18.0.4');
    await releaseRouterAddress(store.db, 'acct_holds1', region);
    await releaseRouterAddress(store.db, 'acct_holds1', region);
    expect(await routerAddresses(store.db, 'acct_holds1')).toEqual([]);
    expect(await take(region)).toBe(router);
  });

  it('holds nothing for a router when the pool is full', async () => {
    const region = freshRegion();
    const tiny = parseCidr('198.18.1.0/30');
    expect(await holdRouterAddress(store.db, 'acct_holds4', region, tiny, now)).toBe('198.18.1.2');
    expect(await holdRouterAddress(store.db, 'acct_holds5', region, tiny, now)).toBeNull();
    expect(await routerAddresses(store.db, 'acct_holds5')).toEqual([]);
  });

  it('holds a configured gateway the pool would hand out, and refuses one already held', async () => {
    const region = freshRegion();
    // The pool's first address is never handed out: nothing to hold.
    await holdGatewayAddress(store.db, region, '198.18.0.1', block, now);
    const held = () =>
      store.db
        .selectFrom('public_address_holds')
        .select(['ip', 'holder'])
        .where('region', '=', region)
        .execute();
    expect(await held()).toEqual([]);
    await holdGatewayAddress(store.db, region, '198.18.0.3', block, now);
    expect(await take(region)).toBe('198.18.0.2');
    expect(await take(region)).toBe('198.18.0.4');
    expect(await holdRouterAddress(store.db, 'acct_holds3', region, block, now)).toBe('198.18.0.5');
    await expect(holdGatewayAddress(store.db, region, '198.18.0.5', block, now)).rejects.toThrow(
      /198\.18\.0\.5 is held by router:acct_holds3/,
    );
    // The refused change kept the gateway it had.
    expect(await held()).toEqual(expect.arrayContaining([{ ip: '198.18.0.3', holder: 'gateway' }]));
  });
});
