/**
 * The names that resolve inside a VPC (issue 31 item 5): OVN's own DNS (a `DNS` row the VPC's logical
 * switch names in `dns_records`). ovn-controller answers a guest's query for a name the row holds
 * itself, whichever server it was sent to; the guests ask the router's address, the resolver the
 * VPC's DHCP options give (topology.ts), and acls.ts lets those queries through whatever the rules say.
 *
 * Per instance: `<id>.<region>.internal` (the `internal_hostname` the API shows) and, where no other
 * instance of the account in the region has the same name (case aside, as DNS compares), its name as
 * `<name>.<region>.internal`. Keys are lower case: OVN compares the query's name in lower case.
 * A name that is not a host name (a label longer than 63, an empty label) gets no record.
 */
import type { Cell, DesiredVpc, Row } from './topology.js';

export type DnsTable = 'DNS';

/** The columns Nimbus writes in OVN's DNS table (topology.ts's COLUMNS includes them). */
export const DNS_COLUMNS = {
  DNS: { records: 'map', external_ids: 'map' },
} as const;

/** The zone of a region's private names. */
export function internalZone(region: string): string {
  return `${region}.internal`;
}

const LABEL = /^[a-z0-9_-]{1,63}$/;

function hostName(name: string): boolean {
  return name.length <= 253 && name.split('.').every((label) => LABEL.test(label));
}

/** The VPC's records: name → the private IP (OVN's `records` map: name → space-separated addresses). */
export function dnsRecords(vpc: Pick<DesiredVpc, 'region' | 'ports'>): Record<string, string> {
  const zone = internalZone(vpc.region);
  const byName = new Map<string, string[]>();
  for (const port of vpc.ports) {
    const name = port.hostname.toLowerCase();
    byName.set(name, [...(byName.get(name) ?? []), port.ip]);
  }
  const records: Record<string, string> = {};
  for (const port of vpc.ports) {
    const byId = `${port.instanceId.toLowerCase()}.${zone}`;
    if (hostName(byId)) records[byId] = port.ip;
  }
  for (const [name, ips] of byName) {
    const fqdn = `${name}.${zone}`;
    // An id's record wins: an id never looks like a name another instance could take, but be sure.
    if (ips.length === 1 && hostName(fqdn) && records[fqdn] === undefined) records[fqdn] = ips[0]!;
  }
  return records;
}

/** The VPC's DNS row (none when it has no record), and what its switch's `dns_records` names. */
export function dnsRows(
  vpc: Pick<DesiredVpc, 'region' | 'ports'>,
  rowKey: string,
  ids: (rowKey: string) => Record<string, string>,
): { rows: Row[]; refs: string[] } {
  const records = dnsRecords(vpc);
  if (Object.keys(records).length === 0) return { rows: [], refs: [] };
  const columns: Record<string, Cell> = { records, external_ids: ids(rowKey) };
  return { rows: [{ table: 'DNS', key: rowKey, columns }], refs: [rowKey] };
}
