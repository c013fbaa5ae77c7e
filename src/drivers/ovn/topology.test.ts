import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Change,
  canonicalCell,
  type DesiredVpc,
  diffRows,
  type ExistingRow,
  type Row,
  toOperations,
  vpcKey,
  vpcRows,
} from './topology.js';

const hex = fc.integer({ min: 0, max: 255 }).map((n) => n.toString(16).padStart(2, '0'));
const port = fc.record({
  instanceId: fc.constantFrom('ins_a', 'ins_b', 'ins_c', 'ins_d', 'ins_e'),
  mac: fc.tuple(hex, hex).map(([a, b]) => `0a:00:00:00:${a}:${b}`),
  ip: fc.integer({ min: 2, max: 250 }).map((n) => `10.10.0.${n}`),
  hostname: fc.constantFrom('web', 'db', 'cache'),
});
const vpc: fc.Arbitrary<DesiredVpc> = fc.record({
  accountId: fc.constantFrom('acct_1', 'acct_2'),
  region: fc.constantFrom('us-east-1', 'eu-west-1'),
  cidr: fc.constantFrom('10.10.0.0/16', '10.10.0.0/24'),
  router: fc.record({
    mac: fc.constantFrom('0a:58:0a:0a:00:01', '0a:58:0a:0a:00:02'),
    ip: fc.constant('10.10.0.1'),
  }),
  ports: fc.uniqueArray(port, { selector: (p) => p.instanceId, maxLength: 4 }),
});
/** VPCs of distinct accounts and regions; an instance id appears in one VPC only, as in Nimbus. */
const topology = fc.uniqueArray(vpc, { selector: vpcKey, maxLength: 4 }).map((vpcs) => {
  const seen = new Set<string>();
  return vpcs.map((v) => ({
    ...v,
    ports: v.ports
      .map((p) => ({ ...p, instanceId: `${p.instanceId}-${v.accountId}-${v.region}` }))
      .filter((p) => !seen.has(p.instanceId) && seen.add(p.instanceId)),
  }));
});

let uuids = 0;
/** OVN after `changes`: what OVSDB does with the insert, update and delete operations. */
function applyChanges(existing: readonly ExistingRow[], changes: readonly Change[]): ExistingRow[] {
  const rows = new Map(existing.map((row) => [row.uuid, { ...row, columns: { ...row.columns } }]));
  for (const change of changes) {
    if (change.op === 'insert') {
      const uuid = `u${uuids++}`;
      rows.set(uuid, { table: change.table, key: change.key, uuid, columns: { ...change.columns } });
    } else if (change.op === 'update') Object.assign(rows.get(change.uuid)!.columns, change.columns);
    else rows.delete(change.uuid);
  }
  return [...rows.values()];
}

const canonical = (rows: readonly Row[]) =>
  rows
    .map(
      (r) =>
        `${r.table} ${r.key} ${Object.keys(r.columns)
          .sort()
          .map((c) => `${c}=${canonicalCell(r.columns[c])}`)}`,
    )
    .sort();

describe('the OVN topology diff', () => {
  it('turns any existing set of Nimbus rows into exactly the desired rows, and then finds nothing to do', () => {
    fc.assert(
      fc.property(topology, topology, (before, after) => {
        const existing = applyChanges([], diffRows(before.flatMap(vpcRows), []));
        const desired = after.flatMap(vpcRows);
        const changes = diffRows(desired, existing);
        const result = applyChanges(existing, changes);
        expect(canonical(result)).toEqual(canonical(desired));
        expect(diffRows(desired, result)).toEqual([]);
        // A row kept is updated in place, never deleted and made again: its uuid stays.
        const kept = new Set(desired.map((r) => `${r.table} ${r.key}`));
        for (const change of changes) {
          if (change.op === 'delete') expect(kept.has(`${change.table} ${change.key}`)).toBe(false);
        }
      }),
    );
  });

  it('updates only the columns that differ, and compares sets as sets', () => {
    const desired = vpcRows({
      accountId: 'acct_1',
      region: 'us-east-1',
      cidr: '10.10.0.0/16',
      router: { mac: '0a:58:0a:0a:00:01', ip: '10.10.0.1' },
      ports: [
        { instanceId: 'ins_a', mac: '0a:00:00:00:00:0a', ip: '10.10.0.10', hostname: 'web' },
        { instanceId: 'ins_b', mac: '0a:00:00:00:00:0b', ip: '10.10.0.11', hostname: 'db' },
      ],
    });
    const existing = applyChanges([], diffRows(desired, []));
    const ls = existing.find((r) => r.table === 'Logical_Switch')!;
    ls.columns.ports = { refs: [...(ls.columns.ports as { refs: string[] }).refs].reverse() };
    const portA = existing.find((r) => r.key === 'ins_a')!;
    portA.columns.options = { hostname: '"old-name"' };
    expect(diffRows(desired, existing)).toEqual([
      {
        op: 'update',
        table: 'Logical_Switch_Port',
        key: 'ins_a',
        uuid: portA.uuid,
        columns: { options: { hostname: '"web"' } },
      },
    ]);
  });

  it('names every row from Nimbus ids, the same each time', () => {
    fc.assert(
      fc.property(topology, (vpcs) => {
        expect(canonical(vpcs.flatMap(vpcRows))).toEqual(canonical(structuredClone(vpcs).flatMap(vpcRows)));
        for (const row of vpcs.flatMap(vpcRows)) {
          const ids = row.columns.external_ids as Record<string, string>;
          expect(ids['nimbus:key']).toBe(row.key);
          expect(ids['nimbus:vpc']).toMatch(/^nimbus-acct_\d-/);
        }
      }),
    );
  });

  it('writes a reference to a row inserted alongside by its uuid-name, to any other by its uuid', () => {
    const empty: DesiredVpc = {
      accountId: 'acct_1',
      region: 'us-east-1',
      cidr: '10.10.0.0/16',
      router: { mac: '0a:58:0a:0a:00:01', ip: '10.10.0.1' },
      ports: [],
    };
    const rows = vpcRows({
      ...empty,
      ports: [{ instanceId: 'ins_a', mac: '0a:00:00:00:00:0a', ip: '10.10.0.10', hostname: 'web' }],
    });
    const existing = applyChanges([], diffRows(vpcRows(empty), []));
    const changes = diffRows(rows, existing);
    const uuidOfKey = new Map(existing.map((r) => [r.key, r.uuid]));
    const operations = toOperations(changes, uuidOfKey);
    const insert = operations.find((o) => o.op === 'insert')!;
    expect(insert).toMatchObject({ table: 'Logical_Switch_Port', 'uuid-name': 'row0' });
    const update = operations.find((o) => o.op === 'update' && o.table === 'Logical_Switch');
    expect(update).toMatchObject({
      row: {
        ports: [
          'set',
          expect.arrayContaining([
            ['named-uuid', 'row0'],
            ['uuid', uuidOfKey.get(`${vpcKey({ accountId: 'acct_1', region: 'us-east-1' })}-rsp`)],
          ]),
        ],
      },
    });
    expect(() => toOperations(changes, new Map())).toThrow(/refers to/);
  });
});
