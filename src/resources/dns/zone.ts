/**
 * Where a queried name falls in what the DNS server is authoritative for (docs/api.md, "DNS"): the forward
 * zone NIMBUS_PUBLIC_DOMAIN, whose names are `<instance>.<region>.<domain>`, and the reverse zones of the
 * regions' public IPv4 pools. Pure: the store is asked only about a place this names.
 */
import { ID_PREFIXES } from '../../platform/domain/ids.js';
import { intToIp, ipToInt, parseCidr } from '../addresses/addresses.js';

/** The one name server the zones name (NS and SOA MNAME), under the zone itself. */
export const NAMESERVER_LABEL = 'ns1';

const INSTANCE_ID = new RegExp(`^${ID_PREFIXES.instance}_[0-9a-z]{26}$`);
/**
 * A name is served only when it is one hostname label (RFC 1123) in lower case: DNS compares names without
 * case while instance names keep theirs, and a dotted name would make the labels before it names that do
 * not exist (an NXDOMAIN there tells a resolver minimising its queries that nothing exists below).
 */
const HOSTNAME_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const OCTET = /^(?:0|[1-9][0-9]{0,2})$/;

export type Place =
  /** NIMBUS_PUBLIC_DOMAIN itself: SOA and NS. */
  | { kind: 'apex'; zone: string }
  /** `ns1.<domain>`, the name server the zone names. */
  | { kind: 'nameserver'; zone: string }
  /** `<region>.<domain>`: exists (the instances are below it) but holds no record. */
  | { kind: 'region'; zone: string }
  /** `<label>.<region>.<domain>`: an instance by its id, or by its name where that is unique in the region. */
  | { kind: 'instance'; zone: string; region: string; by: 'id' | 'name'; label: string }
  /** A reverse zone's own name: SOA and NS. */
  | { kind: 'reverse-apex'; zone: string }
  /** `d.c.b.a.in-addr.arpa` for an address in a region's pool: PTR when an instance holds it. */
  | { kind: 'address'; zone: string; address: string; regions: string[] }
  /** Under a zone of ours, where nothing can be: NXDOMAIN. */
  | { kind: 'absent'; zone: string }
  /** Not ours: REFUSED (the server is never a resolver). */
  | { kind: 'outside' };

interface Pool {
  region: string;
  /** Network address and size of the whole block (parseCidr's first and last leave some out). */
  network: number;
  size: number;
}

export class Zones {
  readonly domain: string;
  private readonly regions: ReadonlySet<string>;
  private readonly pools: readonly Pool[];
  /** Each reverse zone by name: the whole octets of a pool's prefix, reversed (a /25 is in its /24's zone). */
  private readonly reverseZones: ReadonlySet<string>;

  /** `publicIpPools`: each region's pool (region-settings.ts), which also names every region. */
  constructor(domain: string, publicIpPools: Readonly<Record<string, string>>) {
    this.domain = canonical(domain);
    this.regions = new Set(Object.keys(publicIpPools));
    this.pools = Object.entries(publicIpPools).map(([region, cidr]) => {
      const block = parseCidr(cidr);
      const size = 2 ** (32 - Number(block.cidr.split('/')[1]));
      return { region, network: ipToInt(block.cidr.split('/')[0] as string), size };
    });
    this.reverseZones = new Set(this.pools.map(reverseZoneOf));
  }

  /** Where `name` (as a question carries it, any case, with or without the final dot) falls. */
  locate(name: string): Place {
    const fqdn = canonical(name);
    if (fqdn === this.domain) return { kind: 'apex', zone: this.domain };
    if (fqdn.endsWith(`.${this.domain}`)) return this.forward(fqdn.slice(0, -this.domain.length - 1));
    if (fqdn.endsWith('.in-addr.arpa')) return this.reverse(fqdn);
    return { kind: 'outside' };
  }

  /** The reverse name of an IPv4 address (what a PTR question asks for). */
  static reverseName(address: string): string {
    return `${address.split('.').reverse().join('.')}.in-addr.arpa`;
  }

  /** The name an instance's id answers at, the target of its address's PTR record. */
  hostname(instance: { id: string; region: string }): string {
    return `${instance.id}.${instance.region}.${this.domain}`;
  }

  get nameserver(): string {
    return `${NAMESERVER_LABEL}.${this.domain}`;
  }

  /** `relative` is the part of the name before `.<domain>`. */
  private forward(relative: string): Place {
    const zone = this.domain;
    const labels = relative.split('.');
    if (labels.length === 1) {
      if (labels[0] === NAMESERVER_LABEL) return { kind: 'nameserver', zone };
      return this.regions.has(labels[0] as string) ? { kind: 'region', zone } : { kind: 'absent', zone };
    }
    const [label, region] = labels as [string, string];
    if (labels.length > 2 || !this.regions.has(region)) return { kind: 'absent', zone };
    if (INSTANCE_ID.test(label)) return { kind: 'instance', zone, region, by: 'id', label };
    if (HOSTNAME_LABEL.test(label)) return { kind: 'instance', zone, region, by: 'name', label };
    return { kind: 'absent', zone };
  }

  private reverse(fqdn: string): Place {
    if (this.reverseZones.has(fqdn)) return { kind: 'reverse-apex', zone: fqdn };
    const octets = fqdn.slice(0, -'.in-addr.arpa'.length).split('.').reverse();
    if (octets.length !== 4 || !octets.every((o) => OCTET.test(o) && Number(o) <= 255)) {
      return { kind: 'outside' };
    }
    const value = ipToInt(octets.join('.'));
    const holding = this.pools.filter((pool) => value >= pool.network && value < pool.network + pool.size);
    const first = holding[0];
    if (!first) return { kind: 'outside' };
    return {
      kind: 'address',
      zone: reverseZoneOf(first),
      address: intToIp(value),
      regions: holding.map((pool) => pool.region),
    };
  }
}

function reverseZoneOf(pool: Pool): string {
  const wholeOctets = Math.floor((32 - Math.log2(pool.size)) / 8);
  const octets = intToIp(pool.network).split('.').slice(0, wholeOctets);
  return `${octets.reverse().join('.')}.in-addr.arpa`;
}

/** Lower case, without the final dot: DNS names compare without case (RFC 4343). */
function canonical(name: string): string {
  return name.replace(/\.$/, '').toLowerCase();
}
