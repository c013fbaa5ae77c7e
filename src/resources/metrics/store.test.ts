/**
 * The metrics collector's page of instances (resources/metrics/store.ts `monitoredInstances`), on a real store of
 * each kind: exactly the instances with monitoring on whose machine may be up, in id order, after the
 * given id. On SQLite the page is read from the partial index `instances_monitored` (migration 0015):
 * without it every collection read the whole table, 130 ms of the event loop every 10 s with a million
 * instances of which none were monitored.
 */
import fc from 'fast-check';
import { CompiledQuery } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from '../../../test/helpers/backends.js';
import { migrateToLatest, openStore, type Store } from '../../platform/store/db.js';
import { MIGRATIONS } from '../../resources.js';
import { insertAccount } from '../account/store.js';
import type { Instance } from '../instances/record.js';
import { INSTANCE_STATUSES, type InstanceStatus } from '../instances/states.js';
import { insertInstance } from '../instances/store.js';
import { monitoredInstances, monitoredInstancesQuery } from './store.js';

const AT = '2026-11-27T00:00:00.000Z';

function instance(accountId: string, n: number, status: InstanceStatus, monitoring: boolean): Instance {
  return {
    id: `ins_${String(n).padStart(6, '0')}`,
    account_id: accountId,
    name: `i${n}`,
    status,
    operation: null,
    operation_at: null,
    instance_type: 'compute-1x',
    region: 'us-east-1',
    image: 'ubuntu-24.04',
    ssh_key_ids: [],
    public_ip: `100.64.${n >> 8}.${n & 255}`,
    private_ip: `10.10.${n >> 8}.${n & 255}`,
    tags: {},
    user_data: null,
    encryption_key_id: null,
    firewall_preset: 'web',
    monitoring,
    backup_schedule: null,
    root_volume_id: `vol_${n}`,
    protection: { delete: false },
    version: 1,
    created_at: AT,
    updated_at: AT,
  };
}

describe.each(STORES)('the collector page of monitored instances (%s)', (kind) => {
  const backing = storeForSuite(kind, { dataDirPrefix: 'nimbus-monitored-' });
  let store: Store;
  let accounts = 0;
  beforeAll(async () => {
    store = openStore({ dataDir: backing.dataDir, databaseUrl: backing.databaseUrl });
    await migrateToLatest(store.db, MIGRATIONS);
  });
  afterAll(async () => {
    await store.close();
  });

  it('holds exactly the monitored instances that may be up, in id order, page after page', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom(...INSTANCE_STATUSES), fc.boolean()), { maxLength: 40 }),
        fc.integer({ min: 1, max: 7 }),
        async (fleet, pageSize) => {
          accounts += 1;
          const accountId = `acct_${kind}_${accounts}`;
          const made = fleet.map(([status, monitoring], n) =>
            instance(accountId, accounts * 100 + n, status, monitoring),
          );
          await store.db.transaction().execute(async (trx) => {
            await insertAccount(trx, {
              id: accountId,
              name: 'a',
              email: `${accountId}@example.com`,
              company: null,
              billing_email: null,
              plan: 'free',
              status: 'active',
              rate_limit_per_hour: null,
              rate_limit_burst: null,
              created_at: AT,
              updated_at: AT,
            });
            for (const row of made) await insertInstance(trx, row);
          });
          const expected = made
            .filter((row) => row.monitoring && (row.status === 'running' || row.status === 'stopping'))
            .map((row) => row.id);
          // Only this account's: earlier runs' instances have lower ids, and none come after.
          const found: string[] = [];
          let after = `ins_${String(accounts * 100 - 1).padStart(6, '0')}`;
          for (;;) {
            const page = await monitoredInstances(store.db, after, pageSize);
            found.push(...page.map((row) => row.id));
            if (page.length < pageSize) break;
            after = (page.at(-1) as { id: string }).id;
          }
          expect(found).toEqual(expected);
        },
      ),
      { numRuns: 25 },
    );
  });
});

describe('the collector page of monitored instances, its plan (sqlite)', () => {
  const backing = storeForSuite('sqlite', { dataDirPrefix: 'nimbus-monitored-plan-' });
  let store: Store;
  beforeAll(async () => {
    store = openStore({ dataDir: backing.dataDir });
    await migrateToLatest(store.db, MIGRATIONS);
  });
  afterAll(async () => {
    await store.close();
  });

  it('is read from the partial index, not by reading every instance', async () => {
    const query = monitoredInstancesQuery(store.db, '', 500).compile();
    const plan = await store.db
      .executeQuery(CompiledQuery.raw(`explain query plan ${query.sql}`, [...query.parameters]))
      .then((result) => JSON.stringify(result.rows));
    expect(plan).toContain('instances_monitored');
  });
});
