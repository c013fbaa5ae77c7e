/**
 * Address scopes against the rule they replace (resources/addresses/addresses.ts `lowestFree` over every address in
 * use): on a real store (SQLite, and PostgreSQL where it runs), any sequence of takes and returns hands
 * out exactly what the lowest-free scan would, through exhaustion and reuse, and a scope set up over
 * addresses already held continues from them. Each store has a one-statement way for the usual take
 * (SQLite: nothing free, the next of the pool; PostgreSQL: a free row) and the long way for the rest;
 * the sequences go through both.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from '../../../test/helpers/backends.js';
import { migrateToLatest, openStore, type Store } from '../../platform/store/db.js';
import { MIGRATIONS } from '../../resources.js';
import { type AddressScope, returnAddress, takeAddress } from './address-store.js';
import { intToIp, lowestFree, parseCidr } from './addresses.js';

describe.each(STORES)('address scopes (%s)', (kind) => {
  const backing = storeForSuite(kind, { dataDirPrefix: 'nimbus-addresses-' });
  let store: Store;
  beforeAll(async () => {
    store = openStore({ dataDir: backing.dataDir, databaseUrl: backing.databaseUrl });
    await migrateToLatest(store.db, MIGRATIONS);
  });
  afterAll(async () => {
    await store.close();
  });

  let scopes = 0;
  /** A fresh scope over a /28 (13 addresses handed out) whose holders are `held`, as the rows would be. */
  function scopeOver(held: Set<string>): AddressScope {
    scopes += 1;
    return { key: `test:${scopes}`, block: parseCidr('10.9.0.0/28'), inUse: async () => [...held] };
  }

  it('hands out what the lowest-free scan would, for any takes and returns', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.constant('take' as const), fc.nat(15)), { maxLength: 60 }),
        fc.uniqueArray(fc.integer({ min: 2, max: 14 }), { maxLength: 6 }),
        async (steps, initially) => {
          const held = new Set(initially.map((n) => `10.9.0.${n}`));
          const scope = scopeOver(held);
          for (const step of steps) {
            if (step === 'take') {
              const expected = lowestFree(scope.block, held);
              const got = await store.db.transaction().execute((trx) => takeAddress(trx, scope));
              expect(got).toBe(expected);
              if (got) held.add(got);
            } else {
              const ip = [...held].sort()[step % Math.max(held.size, 1)];
              if (!ip) continue;
              await store.db.transaction().execute((trx) => returnAddress(trx, scope.key, ip));
              held.delete(ip);
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  // Found by bench/create-at-scale.mjs: the first create in a region holding 400,000 public addresses
  // answered 500 (Math.max over every held address overflowed the stack).
  it('sets a scope up over 400,000 addresses already held, and continues after the highest', async () => {
    scopes += 1;
    const block = parseCidr('100.64.0.0/10');
    const held = Array.from({ length: 400_000 }, (_, i) => intToIp(block.first + i));
    const scope: AddressScope = { key: `test:${scopes}`, block, inUse: async () => held };
    const got = await store.db.transaction().execute((trx) => takeAddress(trx, scope));
    expect(got).toBe(intToIp(block.first + 400_000));
  });

  it('a take rolled back with its transaction leaves the address free', async () => {
    const scope = scopeOver(new Set());
    await expect(
      store.db.transaction().execute(async (trx) => {
        expect(await takeAddress(trx, scope)).toBe('10.9.0.2');
        throw new Error('the create failed after allocating');
      }),
    ).rejects.toThrow('the create failed');
    expect(await store.db.transaction().execute((trx) => takeAddress(trx, scope))).toBe('10.9.0.2');
  });
});
