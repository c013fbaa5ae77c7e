import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dnsRecords, dnsRows } from './dns-records.js';
import { vpcKey, vpcRows } from './topology.js';
import { vpcsOf } from './vpcs.js';

const port = (instanceId: string, hostname: string, ip: string) => ({
  instanceId,
  hostname,
  ip,
  mac: '0a:00:00:00:00:01',
});

describe("a VPC's DNS records", () => {
  it('names every instance by id and, where the name is unique in the VPC, by name, in lower case', () => {
    const records = dnsRecords({
      region: 'us-east-1',
      ports: [
        port('ins_a1', 'Web', '10.10.0.2'),
        port('ins_b2', 'db', '10.10.0.3'),
        port('ins_c3', 'db', '10.10.0.4'),
        port('ins_d4', 'bad..name', '10.10.0.5'),
      ],
    });
    expect(records).toEqual({
      'ins_a1.us-east-1.internal': '10.10.0.2',
      'ins_b2.us-east-1.internal': '10.10.0.3',
      'ins_c3.us-east-1.internal': '10.10.0.4',
      'ins_d4.us-east-1.internal': '10.10.0.5',
      'web.us-east-1.internal': '10.10.0.2',
    });
  });

  it('gives a name to exactly one address and each instance its id, for any set of instances', () => {
    const instance = fc.record({
      id: fc.stringMatching(/^ins_[0-9a-z]{6}$/),
      name: fc.constantFrom('web', 'WEB', 'db-1', 'cache', 'a.b', 'x_y'),
      ip: fc.integer({ min: 2, max: 250 }).map((n) => `10.10.0.${n}`),
    });
    fc.assert(
      fc.property(fc.uniqueArray(instance, { selector: (i) => i.id, maxLength: 10 }), (list) => {
        const records = dnsRecords({
          region: 'eu-central-1',
          ports: list.map((i) => port(i.id, i.name, i.ip)),
        });
        for (const i of list) expect(records[`${i.id}.eu-central-1.internal`]).toBe(i.ip);
        for (const i of list) {
          const same = list.filter((other) => other.name.toLowerCase() === i.name.toLowerCase());
          expect(records[`${i.name.toLowerCase()}.eu-central-1.internal`]).toBe(
            same.length === 1 ? i.ip : undefined,
          );
        }
        expect(Object.keys(records).every((name) => name === name.toLowerCase())).toBe(true);
      }),
    );
  });

  it("is one DNS row the VPC's switch names, gone with the VPC's last instance", () => {
    const [vpc] = vpcsOf([
      { id: 'ins_1', account_id: 'acct_a', region: 'us-east-1', name: 'x', private_ip: '10.10.0.2' },
    ]);
    const rows = vpcRows(vpc!);
    const dns = rows.filter((row) => row.table === 'DNS');
    expect(dns.map((row) => row.key)).toEqual([`${vpcKey(vpc!)}-dns`]);
    expect(rows.find((row) => row.table === 'Logical_Switch')?.columns.dns_records).toEqual({
      refs: [`${vpcKey(vpc!)}-dns`],
    });
    expect(dnsRows({ region: 'us-east-1', ports: [] }, 'k', () => ({}))).toEqual({ rows: [], refs: [] });
  });
});
