import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { intToIp, ipToInt } from '../addresses/addresses.js';
import { Zones } from './zone.js';

const POOLS = {
  'us-east-1': '203.0.113.0/24',
  'eu-central-1': '192.0.2.0/25',
  'ap-northeast-1': '192.0.2.128/25',
};
const zones = new Zones('Cloud.Example.', POOLS);
const DOMAIN = 'cloud.example';

const region = fc.constantFrom(...Object.keys(POOLS));
const instanceId = fc
  .string({ unit: fc.constantFrom(...'0123456789abcdefghjkmnpqrstvwxyz'), minLength: 26, maxLength: 26 })
  .map((rest) => `ins_${rest}`);
/** Any case of a name, with or without its final dot: DNS does not tell them apart. */
const spelling = (name: string) =>
  fc
    .tuple(fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length }), fc.boolean())
    .map(
      ([upper, dot]) => [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('') + (dot ? '.' : ''),
    );

describe('Zones.locate', () => {
  it('finds an instance by id under its region, however the name is spelt', () => {
    fc.assert(
      fc.property(
        fc
          .tuple(instanceId, region)
          .chain(([id, r]) =>
            fc.tuple(fc.constant(id), fc.constant(r), spelling(zones.hostname({ id, region: r }))),
          ),
        ([id, r, name]) => {
          expect(zones.locate(name)).toEqual({
            kind: 'instance',
            zone: DOMAIN,
            region: r,
            by: 'id',
            label: id,
          });
        },
      ),
    );
  });

  it('takes a lower-case hostname label as a name, and anything else under the domain as absent', () => {
    expect(zones.locate(`web-1.us-east-1.${DOMAIN}`)).toMatchObject({
      kind: 'instance',
      by: 'name',
      label: 'web-1',
    });
    for (const name of ['-web', 'web-', 'we_b', 'a'.repeat(64), 'x.web']) {
      expect(zones.locate(`${name}.us-east-1.${DOMAIN}`), name).toEqual({ kind: 'absent', zone: DOMAIN });
    }
    expect(zones.locate(`web.us-east-9.${DOMAIN}`)).toEqual({ kind: 'absent', zone: DOMAIN });
    expect(zones.locate(`us-east-1.${DOMAIN}`)).toEqual({ kind: 'region', zone: DOMAIN });
    expect(zones.locate(`ns1.${DOMAIN}`)).toEqual({ kind: 'nameserver', zone: DOMAIN });
    expect(zones.locate(DOMAIN)).toEqual({ kind: 'apex', zone: DOMAIN });
  });

  it('is never authoritative for a name outside the domain and the pools', () => {
    const label = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
    fc.assert(
      fc.property(fc.array(label, { minLength: 1, maxLength: 5 }), (labels) => {
        const name = labels.join('.');
        fc.pre(name !== DOMAIN && !name.endsWith(`.${DOMAIN}`) && !name.endsWith('in-addr.arpa'));
        expect(zones.locate(name)).toEqual({ kind: 'outside' });
      }),
    );
  });

  it("answers for an address's reverse name exactly when a region's pool holds the address", () => {
    const pools = Object.entries(POOLS).map(([r, cidr]) => {
      const [network, bits] = cidr.split('/') as [string, string];
      return { region: r, first: ipToInt(network), size: 2 ** (32 - Number(bits)) };
    });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 32 - 1 }), (value) => {
        const address = intToIp(value);
        const holding = pools.filter((p) => value >= p.first && value < p.first + p.size);
        const place = zones.locate(Zones.reverseName(address));
        if (holding.length === 0) expect(place).toEqual({ kind: 'outside' });
        else expect(place).toMatchObject({ kind: 'address', address, regions: holding.map((p) => p.region) });
      }),
    );
    // Addresses near the pools, where the property's random ones rarely land.
    expect(zones.locate(Zones.reverseName('192.0.2.200'))).toMatchObject({
      kind: 'address',
      zone: '2.0.192.in-addr.arpa',
      regions: ['ap-northeast-1'],
    });
    expect(zones.locate(Zones.reverseName('203.0.114.1'))).toEqual({ kind: 'outside' });
    expect(zones.locate('113.0.203.in-addr.arpa')).toEqual({
      kind: 'reverse-apex',
      zone: '113.0.203.in-addr.arpa',
    });
    expect(zones.locate('01.113.0.203.in-addr.arpa')).toEqual({ kind: 'outside' });
  });
});
