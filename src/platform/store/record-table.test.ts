/**
 * A record table on each store: a record goes in and comes back as it went, the version guards every
 * write, another account's record reads as missing, and a lock holds the row until the transaction ends.
 * The table is `snapshots`, with a record declared here (the platform knows no resource's record).
 */
import { Type } from '@sinclair/typebox';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from '../../../test/helpers/backends.js';
import { MIGRATIONS } from '../../resources.js';
import { migrateToLatest, openStore, type Store } from './db.js';
import { booleanInteger, jsonText, nullableJsonText, recordTable } from './record-table.js';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) =>
  Type.Union([schema, Type.Null()]);

const TestRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  source_volume_id: Type.String(),
  source_instance_id: Nullable(Type.String()),
  size_gb: Type.Integer(),
  region: Type.String(),
  status: Type.Union([Type.Literal('creating'), Type.Literal('available')]),
  kind: Type.String(),
  error: Nullable(Type.String()),
  tags: Type.Record(Type.String(), Type.String()),
  version: Type.Integer(),
  created_at: Type.String(),
  completed_at: Nullable(Type.String()),
  updated_at: Type.String(),
});

const snapshots = recordTable({
  table: 'snapshots',
  record: TestRecord,
  codecs: { tags: jsonText<Record<string, string>>() },
});

const AT = '2026-11-28T00:00:00.000Z';
let made = 0;
function newRecord(accountId: string, tags: Record<string, string> = { team: 'a' }) {
  made += 1;
  return {
    id: `snap_rt_${made}`,
    account_id: accountId,
    name: `snap-${made}`,
    source_volume_id: 'vol_1',
    source_instance_id: null,
    size_gb: 10,
    region: 'us-east-1',
    status: 'creating' as const,
    kind: 'manual',
    error: null,
    tags,
    version: 1,
    created_at: AT,
    completed_at: null,
    updated_at: AT,
  };
}

describe('column codecs', () => {
  it('give back what they were given', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.string()), fc.boolean(), (object, flag) => {
        expect(jsonText<Record<string, string>>().decode(jsonText().encode(object))).toEqual(object);
        const nullable = nullableJsonText<Record<string, string>>();
        expect(nullable.decode(nullable.encode(object))).toEqual(object);
        expect(nullable.decode(nullable.encode(null))).toBeNull();
        expect(booleanInteger.decode(booleanInteger.encode(flag))).toBe(flag);
      }),
    );
  });

  it('lists the columns in the record’s order and encodes only the fields a change names', () => {
    expect(snapshots.columns).toEqual(Object.keys(TestRecord.properties));
    expect(snapshots.encode({ tags: { a: 'b' }, name: 'x', error: undefined })).toEqual({
      tags: '{"a":"b"}',
      name: 'x',
      error: undefined,
    });
  });
});

describe('the record checked against the table type', () => {
  it('refuses, when it compiles, a record without a column or a stored field without a codec', () => {
    const { completed_at: _left, ...fields } = TestRecord.properties;
    const withoutColumn = () =>
      // @ts-expect-error completed_at is a column of snapshots but no field of the record
      recordTable({ table: 'snapshots', record: Type.Object(fields), codecs: { tags: jsonText() } });
    // @ts-expect-error tags is an object kept in a text column: it needs its codec
    const withoutCodec = () => recordTable({ table: 'snapshots', record: TestRecord, codecs: {} });
    expect([withoutColumn, withoutCodec]).toHaveLength(2);
  });
});

describe.each(STORES)('a record table (%s)', (kind) => {
  const backing = storeForSuite(kind, { dataDirPrefix: 'nimbus-record-table-' });
  let store: Store;
  beforeAll(async () => {
    store = openStore({ dataDir: backing.dataDir, databaseUrl: backing.databaseUrl });
    await migrateToLatest(store.db, MIGRATIONS);
  });
  afterAll(async () => {
    await store.close();
  });

  it('reads back the record it inserted, by id and for its own account only', async () => {
    const record = newRecord('acct_rt_1', { team: 'a', 'env/x': 'prod' });
    await snapshots.insert(store.db, record);
    expect(await snapshots.find(store.db, record.id)).toEqual(record);
    expect(await snapshots.findOwned(store.db, 'acct_rt_1', record.id)).toEqual(record);
    expect(await snapshots.findOwned(store.db, 'acct_rt_2', record.id)).toBeUndefined();
    expect(await snapshots.lock(store.db, 'acct_rt_2', record.id)).toBeUndefined();
    expect(await snapshots.find(store.db, 'snap_missing')).toBeUndefined();
  });

  it('writes a change over the version read and bumps it; a writer holding an older version loses', async () => {
    const record = newRecord('acct_rt_1');
    await snapshots.insert(store.db, record);
    const updated = await snapshots.update(store.db, record, {
      status: 'available',
      tags: {},
      completed_at: AT,
    });
    expect(updated).toEqual({ ...record, status: 'available', tags: {}, completed_at: AT, version: 2 });
    expect(await snapshots.update(store.db, record, { name: 'late' })).toBeUndefined();
    expect(await snapshots.delete(store.db, record)).toBe(false);
    expect((await snapshots.find(store.db, record.id))?.name).toBe(record.name);
    expect(await snapshots.delete(store.db, updated ?? record)).toBe(true);
    expect(await snapshots.find(store.db, record.id)).toBeUndefined();
  });

  it('holds a locked record until the transaction ends: a second writer sees the first one’s change', async () => {
    const record = newRecord('acct_rt_1');
    await snapshots.insert(store.db, record);
    const order: string[] = [];
    const first = store.db.transaction().execute(async (trx) => {
      const held = await snapshots.lock(trx, 'acct_rt_1', record.id);
      order.push('first holds');
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (held) await snapshots.update(trx, held, { name: 'first' });
      order.push('first writes');
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const second = store.db.transaction().execute(async (trx) => {
      const held = await snapshots.lock(trx, 'acct_rt_1', record.id);
      order.push(`second reads ${held?.name} v${held?.version}`);
    });
    await Promise.all([first, second]);
    expect(order).toEqual(['first holds', 'first writes', `second reads first v2`]);
  });
});
