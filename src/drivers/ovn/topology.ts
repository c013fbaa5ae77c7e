/**
 * A VPC in OVN's northbound database: what rows the desired state makes (`vpcRows`, pure), what it
 * takes to turn the rows OVN has into those (`diffRows`, pure), and `applyTopology`, which reads,
 * diffs and writes the difference in one transaction. OVN keeps nothing the store does not: every row
 * Nimbus makes carries `nimbus:key` (its deterministic name) and `nimbus:vpc` in external_ids, and a
 * row so marked that is not desired is deleted. Rows without the marks are never touched.
 *
 * Per VPC (an account in a region): a logical switch on the private block, a logical router whose port
 * on the switch is the gateway, one DHCP_Options row (the router as gateway and resolver), and per
 * instance a logical switch port named by the instance id (a VM's interface binds to it with
 * external_ids:iface-id), with port security on the MAC and private IP and the hostname OVN's DHCP
 * hands out.
 */
import { parseCidrBlock } from '../../platform/domain/cidrs.js';
import { ACL_COLUMNS, type AclTable, firewallRows, type PortFirewallInput } from './acls.js';
import { DNS_COLUMNS, type DnsTable, dnsRows } from './dns-records.js';
import {
  mapEntries,
  type Northbound,
  type OvsdbOperation,
  type OvsdbRow,
  type OvsdbValue,
  ovsdbMap,
  ovsdbSet,
  setElements,
  uuidOf,
} from './northbound.js';
import { routerAttachment } from './router-attachment.js';
import { PUBLIC_COLUMNS, type PublicTable, publicRows, type VpcPublicSide } from './uplink.js';
import { gatewayRows, type VpcGateway } from './vpn-gateway-rows.js';

export interface VpcPort {
  /** The instance id: also the logical port's name, which the VM's interface names as its iface-id. */
  instanceId: string;
  mac: string;
  ip: string;
  hostname: string;
  /** Its effective firewall rules (acls.ts aclInputsFor); without them the port gets no ACLs. */
  firewall?: PortFirewallInput['firewall'];
}

export interface DesiredVpc {
  accountId: string;
  region: string;
  /** The account's private block, e.g. 10.10.0.0/16. */
  cidr: string;
  /** The router's side of the private block: the instances' gateway, DHCP server and resolver. */
  router: { mac: string; ip: string };
  ports: readonly VpcPort[];
  /** Its side on the public link (uplink.ts): a gateway port, a default route and one NAT per public IP. */
  public?: VpcPublicSide;
  /**
   * The host's own port on the VPC (a `localport`: each chassis binds its own), when there is one: the
   * guests reach it at `ip` through the router (the router port holds `routerNetwork` too), and
   * the host reaches the guests from it, so it must be in no private block.
   */
  hostPort?: HostPort;
  /** Its VPN gateways (vpn-gateway-rows.ts): a port, a route to the tunnel and, with a public side, a NAT each. */
  gateways?: readonly VpcGateway[];
}

export interface HostPort {
  mac: string;
  /** e.g. 169.254.169.254 */
  ip: string;
  /** The router's address on the host port's network, with its prefix: e.g. 169.254.0.1/16. */
  routerNetwork: string;
}

export type Table =
  | 'Logical_Switch'
  | 'Logical_Switch_Port'
  | 'Logical_Router'
  | 'Logical_Router_Port'
  | 'DHCP_Options'
  | AclTable
  | DnsTable
  | PublicTable;

/** A cell: a string, a set of strings, a string map, or a set of references to other rows by key. */
export type Cell =
  | string
  | readonly string[]
  | Readonly<Record<string, string>>
  | { readonly refs: readonly string[] };

/** The column types Nimbus writes, per table: every desired row has each of them. */
export const COLUMNS: Record<Table, Record<string, 'string' | 'integer' | 'strings' | 'map' | 'refs'>> = {
  Logical_Switch: { name: 'string', ports: 'refs', dns_records: 'refs', external_ids: 'map' },
  Logical_Switch_Port: {
    name: 'string',
    type: 'string',
    addresses: 'strings',
    port_security: 'strings',
    options: 'map',
    dhcpv4_options: 'refs',
    external_ids: 'map',
  },
  Logical_Router: {
    name: 'string',
    ports: 'refs',
    nat: 'refs',
    static_routes: 'refs',
    policies: 'refs',
    external_ids: 'map',
  },
  Logical_Router_Port: {
    name: 'string',
    mac: 'string',
    networks: 'strings',
    gateway_chassis: 'refs',
    external_ids: 'map',
  },
  DHCP_Options: { cidr: 'string', options: 'map', external_ids: 'map' },
  ...ACL_COLUMNS,
  ...DNS_COLUMNS,
  ...PUBLIC_COLUMNS,
};

/** Tables in the order a transaction lists them (referenced rows before the rows that reference them). */
export const TABLES: readonly Table[] = [
  'DHCP_Options',
  'Gateway_Chassis',
  'NAT',
  'Logical_Router_Static_Route',
  'Logical_Router_Policy',
  'Logical_Router_Port',
  'Logical_Switch_Port',
  'ACL',
  'Address_Set',
  'Port_Group',
  'DNS',
  'Logical_Router',
  'Logical_Switch',
];

export interface Row {
  table: Table;
  /** Unique among Nimbus's rows; kept in external_ids as `nimbus:key`. */
  key: string;
  columns: Record<string, Cell>;
}

export interface ExistingRow extends Row {
  uuid: string;
}

export const KEY_ID = 'nimbus:key';
export const VPC_ID = 'nimbus:vpc';

/** The VPC's name in OVN, from the account and region (both ids of Nimbus, so it is stable). */
export function vpcKey(vpc: Pick<DesiredVpc, 'accountId' | 'region'>): string {
  return `nimbus-${vpc.accountId}-${vpc.region}`;
}

/** The logical port of the host's own interface on the VPC (its iface-id on the integration bridge). */
export function hostPortName(vpc: Pick<DesiredVpc, 'accountId' | 'region'>): string {
  return `${vpcKey(vpc)}-host`;
}

/** The rows of one VPC. */
export function vpcRows(vpc: DesiredVpc): Row[] {
  const key = vpcKey(vpc);
  const names = {
    switch: key,
    router: `${key}-router`,
    routerPort: `${key}-lrp`,
    switchRouterPort: `${key}-rsp`,
    dhcp: `${key}-dhcp`,
    dns: `${key}-dns`,
    hostPort: hostPortName(vpc),
  };
  const host = vpc.hostPort;
  const prefix = parseCidrBlock(vpc.cidr).prefix;
  const ids = (rowKey: string, more: Record<string, string> = {}) => ({
    [KEY_ID]: rowKey,
    [VPC_ID]: key,
    'nimbus:account': vpc.accountId,
    'nimbus:region': vpc.region,
    ...more,
  });
  const instancePorts = [...vpc.ports].sort((a, b) => compare(a.instanceId, b.instanceId));
  const publicSide = publicRows(key, vpc.public, ids, {
    routerPort: names.routerPort,
    instances: instancePorts.map((port) => ({ instanceId: port.instanceId, ip: port.ip })),
    tunnels: (vpc.gateways ?? []).map((gateway) => gateway.tunnelCidr),
  });
  const gateways = gatewayRows(vpc.gateways ?? [], vpc.public !== undefined, ids);
  const dns = dnsRows(vpc, names.dns, ids);
  return [
    {
      table: 'DHCP_Options',
      key: names.dhcp,
      columns: {
        cidr: vpc.cidr,
        options: {
          lease_time: '3600',
          router: vpc.router.ip,
          server_id: vpc.router.ip,
          server_mac: vpc.router.mac,
          dns_server: `{${vpc.router.ip}}`,
        },
        external_ids: ids(names.dhcp),
      },
    },
    {
      table: 'Logical_Router_Port',
      key: names.routerPort,
      columns: {
        name: names.routerPort,
        mac: vpc.router.mac,
        networks: [`${vpc.router.ip}/${prefix}`, ...(host ? [host.routerNetwork] : [])],
        external_ids: ids(names.routerPort),
      },
    },
    {
      table: 'Logical_Router',
      key: names.router,
      columns: {
        name: names.router,
        ports: { refs: [names.routerPort, ...publicSide.router.ports] },
        nat: { refs: [...publicSide.router.columns.nat.refs, ...gateways.nats] },
        static_routes: { refs: [...publicSide.router.columns.static_routes.refs, ...gateways.routes] },
        policies: publicSide.router.columns.policies,
        external_ids: ids(names.router),
      },
    },
    ...publicSide.rows,
    ...gateways.rows,
    routerAttachment(names.switchRouterPort, names.routerPort, ids(names.switchRouterPort)),
    ...instancePorts.map(
      (port): Row => ({
        table: 'Logical_Switch_Port',
        key: port.instanceId,
        columns: {
          name: port.instanceId,
          type: '',
          addresses: [`${port.mac} ${port.ip}`],
          port_security: [`${port.mac} ${port.ip}`],
          // OVN reads the option as a constant of its action language, where a string is quoted.
          options: { hostname: JSON.stringify(port.hostname) },
          dhcpv4_options: { refs: [names.dhcp] },
          external_ids: ids(port.instanceId, { 'nimbus:instance': port.instanceId }),
        },
      }),
    ),
    ...(host
      ? [
          {
            table: 'Logical_Switch_Port',
            key: names.hostPort,
            columns: {
              name: names.hostPort,
              type: 'localport',
              addresses: [`${host.mac} ${host.ip}`],
              port_security: [],
              options: {},
              dhcpv4_options: { refs: [] },
              external_ids: ids(names.hostPort),
            },
          } satisfies Row,
        ]
      : []),
    {
      table: 'Logical_Switch',
      key: names.switch,
      columns: {
        name: names.switch,
        ports: {
          refs: [
            names.switchRouterPort,
            ...instancePorts.map((p) => p.instanceId),
            ...(host ? [names.hostPort] : []),
            ...gateways.switchPorts,
          ],
        },
        dns_records: { refs: dns.refs },
        external_ids: ids(names.switch),
      },
    },
    ...firewallRows(
      instancePorts.flatMap((port) =>
        port.firewall ? [{ instanceId: port.instanceId, firewall: port.firewall }] : [],
      ),
      {
        vpc: key,
        dhcpServer: vpc.router.ip,
        resolver: vpc.router.ip,
        ...(host ? { hostAddress: host.ip } : {}),
      },
      ids,
    ),
    ...dns.rows,
  ];
}

export type Change =
  | { op: 'insert'; table: Table; key: string; columns: Record<string, Cell> }
  | { op: 'update'; table: Table; key: string; uuid: string; columns: Record<string, Cell> }
  | { op: 'delete'; table: Table; key: string; uuid: string };

/**
 * What turns `existing` into `desired`: rows missing are inserted, rows whose columns differ are
 * updated (only the columns that differ), rows not desired are deleted. Sets compare as sets.
 * Empty when they already match.
 */
export function diffRows(desired: readonly Row[], existing: readonly ExistingRow[]): Change[] {
  const have = new Map(existing.map((row) => [`${row.table}\0${row.key}`, row]));
  const want = new Set(desired.map((row) => `${row.table}\0${row.key}`));
  const changes: Change[] = [];
  for (const row of desired) {
    const found = have.get(`${row.table}\0${row.key}`);
    if (!found) {
      changes.push({ op: 'insert', table: row.table, key: row.key, columns: row.columns });
      continue;
    }
    const differing: Record<string, Cell> = {};
    for (const [column, value] of Object.entries(row.columns)) {
      if (!sameCell(value, found.columns[column])) differing[column] = value;
    }
    if (Object.keys(differing).length > 0) {
      changes.push({ op: 'update', table: row.table, key: row.key, uuid: found.uuid, columns: differing });
    }
  }
  for (const row of existing) {
    if (!want.has(`${row.table}\0${row.key}`)) {
      changes.push({ op: 'delete', table: row.table, key: row.key, uuid: row.uuid });
    }
  }
  return changes.sort((a, b) => TABLES.indexOf(a.table) - TABLES.indexOf(b.table));
}

/** The cell in a canonical form: sets sorted and without duplicates, maps with sorted keys. */
export function canonicalCell(cell: Cell | undefined): string {
  if (cell === undefined) return 'undefined';
  if (typeof cell === 'string') return JSON.stringify(cell);
  if (Array.isArray(cell)) return JSON.stringify([...new Set(cell as string[])].sort(compare));
  if ('refs' in cell && Array.isArray(cell.refs)) {
    return JSON.stringify({ refs: [...new Set(cell.refs as string[])].sort(compare) });
  }
  const map = cell as Record<string, string>;
  return JSON.stringify(
    Object.keys(map)
      .sort(compare)
      .map((k) => [k, map[k]]),
  );
}

function sameCell(a: Cell, b: Cell | undefined): boolean {
  return canonicalCell(a) === canonicalCell(b);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The changes as one OVSDB transaction's operations: a reference to a row inserted in the same
 * transaction is by its uuid-name, any other by the uuid `uuidOfKey` gives.
 */
export function toOperations(
  changes: readonly Change[],
  uuidOfKey: ReadonlyMap<string, string>,
): OvsdbOperation[] {
  const named = new Map<string, string>();
  for (const change of changes) {
    if (change.op === 'insert') named.set(change.key, `row${named.size}`);
  }
  const reference = (key: string): OvsdbValue => {
    const name = named.get(key);
    if (name) return ['named-uuid', name];
    const uuid = uuidOfKey.get(key);
    if (!uuid) throw new Error(`OVN topology: a row refers to ${key}, which neither exists nor is inserted`);
    return ['uuid', uuid];
  };
  const encode = (table: Table, columns: Record<string, Cell>): OvsdbRow => {
    const row: OvsdbRow = {};
    for (const [column, cell] of Object.entries(columns)) {
      const type = COLUMNS[table][column];
      if (type === 'string') row[column] = cell as string;
      else if (type === 'integer') row[column] = Number(cell);
      else if (type === 'strings') row[column] = ovsdbSet(cell as string[]);
      else if (type === 'map') row[column] = ovsdbMap(cell as Record<string, string>);
      else row[column] = ovsdbSet((cell as { refs: string[] }).refs.map(reference));
    }
    return row;
  };
  return changes.map((change): OvsdbOperation => {
    const where: [string, '==', OvsdbValue][] =
      change.op === 'insert' ? [] : [['_uuid', '==', ['uuid', change.uuid]]];
    if (change.op === 'insert') {
      return {
        op: 'insert',
        table: change.table,
        row: encode(change.table, change.columns),
        'uuid-name': named.get(change.key)!,
      };
    }
    if (change.op === 'update')
      return { op: 'update', table: change.table, where, row: encode(change.table, change.columns) };
    return { op: 'delete', table: change.table, where };
  });
}

/** The rows OVN holds with a `nimbus:key` (of the VPCs in `scope` only, when given), decoded. */
export async function readRows(nb: Northbound, scope?: readonly string[]): Promise<ExistingRow[]> {
  const raw: { table: Table; row: OvsdbRow }[] = [];
  for (const table of TABLES) {
    const columns = ['_uuid', ...Object.keys(COLUMNS[table])];
    const rows =
      scope === undefined
        ? await nb.select(table, [], columns)
        : (
            await Promise.all(
              scope.map((vpc) =>
                nb.select(table, [['external_ids', 'includes', ovsdbMap({ [VPC_ID]: vpc })]], columns),
              ),
            )
          ).flat();
    for (const row of rows) {
      if (mapEntries(row.external_ids)[KEY_ID] !== undefined) raw.push({ table, row });
    }
  }
  const keyOfUuid = new Map(raw.map(({ row }) => [uuidOf(row._uuid), mapEntries(row.external_ids)[KEY_ID]!]));
  return raw.map(({ table, row }) => {
    const columns: Record<string, Cell> = {};
    for (const [column, type] of Object.entries(COLUMNS[table])) {
      const value = row[column];
      if (type === 'string' || type === 'integer') columns[column] = String(value ?? '');
      else if (type === 'strings') columns[column] = setElements(value).map(String);
      else if (type === 'map') columns[column] = mapEntries(value);
      else {
        // A reference to a row Nimbus did not make stays distinct, so the diff takes it out.
        const refs = setElements(value).map((v) => keyOfUuid.get(uuidOf(v)) ?? `uuid:${uuidOf(v)}`);
        columns[column] = { refs };
      }
    }
    return { table, key: mapEntries(row.external_ids)[KEY_ID]!, uuid: uuidOf(row._uuid), columns };
  });
}

export interface ApplyResult {
  inserted: number;
  updated: number;
  deleted: number;
}

/**
 * Makes OVN's northbound database hold exactly the rows of `vpcs`, in one transaction. With `scope`
 * (VPC keys), only rows of those VPCs are read and may be deleted, so one VPC's reconcile leaves the
 * others alone; without it every Nimbus row not desired goes. Running it again changes nothing.
 * Callers serialise applies of one VPC (the per-VPC reconcile job does).
 */
export async function applyTopology(
  nb: Northbound,
  vpcs: readonly DesiredVpc[],
  scope?: readonly string[],
): Promise<ApplyResult> {
  if (scope !== undefined) {
    const outside = vpcs.map(vpcKey).filter((key) => !scope.includes(key));
    if (outside.length > 0) throw new Error(`OVN topology: ${outside.join(', ')} outside the scope applied`);
  }
  const existing = await readRows(nb, scope);
  const changes = diffRows(vpcs.flatMap(vpcRows), existing);
  if (changes.length > 0) {
    await nb.transact(toOperations(changes, new Map(existing.map((row) => [row.key, row.uuid]))));
  }
  return {
    inserted: changes.filter((c) => c.op === 'insert').length,
    updated: changes.filter((c) => c.op === 'update').length,
    deleted: changes.filter((c) => c.op === 'delete').length,
  };
}
