/**
 * The public side of OVN networks (docs/operations.md, "OVN"): NIMBUS_PUBLIC_UPLINK, a host interface
 * (a NIC, or one end of a veth pair), is plugged into a provider bridge of its own, which this chassis
 * maps to the physical network `nimbus-public` (ovn-bridge-mappings). The region's public pool lives on
 * that link with the upstream router at NIMBUS_PUBLIC_GATEWAY (default: the pool's first address, which
 * Nimbus never assigns).
 *
 * A VPC with a public side gets, beside its private rows (topology.ts): a switch on the link (its
 * `localnet` port is how OVN reaches the provider bridge), the router's gateway port on it with an
 * address of the pool, bound to the gateway chassis, a default route via the upstream router, and per
 * public IP a one-to-one NAT (`dnat_and_snat`) of the instance's private IP; with the VPC's `snat`, router
 * policies that count the public bytes of the instances without a public IP (snat-transfer.ts).
 *
 * The switch on the link is one per VPC, not one per region: applies are scoped to one VPC, and a shared
 * switch's `ports` column would hold other VPCs' ports, which a scoped apply neither reads nor may
 * rewrite. OVN carries any number of localnet switches on one physical network.
 *
 * The NATs are centralised on the gateway chassis (no logical_port/external_mac). The userspace
 * datapath does not need them: test/ovn-public-ip.test.ts passes either way on one chassis. Distributed
 * NAT (each instance's chassis answering for its public IP with an external_mac of its own) is a choice
 * for when there are several chassis, each with the uplink mapped.
 */
import { existsSync } from 'node:fs';
import { ConfigError } from '../../platform/config.js';
import { formatIp, parseCidrBlock, parseIp } from '../../platform/domain/cidrs.js';
import { run } from '../qemu/tools.js';
import { addNetdevBridge, type OvnEndpoints } from './daemons.js';
import { routerAttachment } from './router-attachment.js';
import { meterPolicies } from './snat-transfer.js';
import type { Row } from './topology.js';

/** The physical network name the provider bridge is mapped to on every chassis. */
export const PUBLIC_PHYSNET = 'nimbus-public';

/** The tables only the public side writes (topology.ts reads and diffs them with the rest). */
export type PublicTable = 'NAT' | 'Logical_Router_Static_Route' | 'Gateway_Chassis' | 'Logical_Router_Policy';

/**
 * Their columns. Gateway_Chassis' priority is left at its default (0): one gateway chassis per port,
 * so there is nothing to rank.
 */
export const PUBLIC_COLUMNS: Record<
  PublicTable,
  Record<string, 'string' | 'integer' | 'strings' | 'map' | 'refs'>
> = {
  NAT: { type: 'string', external_ip: 'string', logical_ip: 'string', external_ids: 'map' },
  Logical_Router_Static_Route: { ip_prefix: 'string', nexthop: 'string', external_ids: 'map' },
  Gateway_Chassis: { name: 'string', chassis_name: 'string', external_ids: 'map' },
  // The metering policies of instances without a public IP (snat-transfer.ts).
  Logical_Router_Policy: { priority: 'integer', match: 'string', action: 'string', external_ids: 'map' },
};

export interface PublicNat {
  instanceId: string;
  /** The instance's public IP, on the link. */
  publicIp: string;
  /** Its private IP, in the VPC's block. */
  privateIp: string;
}

export interface VpcPublicSide {
  /** The region's public pool (NIMBUS_PUBLIC_IP_POOLS), e.g. 203.0.113.0/24: the link's network. */
  pool: string;
  /** The upstream router on the link (NIMBUS_PUBLIC_GATEWAY; defaultPublicGateway(pool) when unset). */
  gateway: string;
  /** The router's port on the link: an address of the pool held for this VPC, and a MAC. */
  router: { mac: string; ip: string };
  /** The chassis that answers for the VPC's public addresses (the one whose OVS holds the uplink). */
  chassis: string;
  nats: readonly PublicNat[];
  /**
   * The VPC's private block, when its instances without a public IP reach out through the router's own
   * address (a `snat` row; an instance's `dnat_and_snat` is the more specific and wins for it).
   */
  snatBlock?: string;
}

/** The pool's first address, which the address plan never assigns: the upstream router's by default. */
export function defaultPublicGateway(pool: string): string {
  const block = parseCidrBlock(pool);
  if (block.family !== 4) throw new Error(`the public pool ${pool} is not IPv4`);
  return formatIp({ family: 4, value: block.network + 1n });
}

/** The row keys of a VPC's public side (unique among all of Nimbus's rows, as topology.ts needs). */
export function publicNames(vpcKey: string) {
  return {
    switch: `${vpcKey}-public`,
    localnetPort: `${vpcKey}-public-localnet`,
    switchRouterPort: `${vpcKey}-public-rsp`,
    routerPort: `${vpcKey}-public-lrp`,
    gatewayChassis: `${vpcKey}-public-gw`,
    defaultRoute: `${vpcKey}-public-route`,
    nat: (publicIp: string) => `${vpcKey}-nat-${publicIp}`,
    snat: `${vpcKey}-snat`,
    policy: (name: string) => `${vpcKey}-policy-${name}`,
  };
}

/**
 * What the public side adds to the VPC's router row: its gateway port, NATs, default route and the
 * metering policies.
 */
export interface RouterAdditions {
  ports: string[];
  columns: { nat: { refs: string[] }; static_routes: { refs: string[] }; policies: { refs: string[] } };
}

/**
 * The rows of a VPC's public side, and what its router row refers to. Without a public side the router
 * still carries empty `nat` and `static_routes`, so a side taken away is taken out of OVN.
 * `ids(key, more)` gives a row's nimbus external_ids (topology.ts's, so the diff owns these rows).
 */
export function publicRows(
  vpcKey: string,
  side: VpcPublicSide | undefined,
  ids: (rowKey: string, more?: Record<string, string>) => Record<string, string>,
  /** The router's port on the VPC and the VPC's instances, for the metering policies. */
  metered: {
    routerPort: string;
    instances: readonly { instanceId: string; ip: string }[];
    /** The VPN gateways' tunnel networks: private to the VPC, like its block. */
    tunnels: readonly string[];
  },
): { rows: Row[]; router: RouterAdditions } {
  if (side === undefined) {
    return {
      rows: [],
      router: {
        ports: [],
        columns: { nat: { refs: [] }, static_routes: { refs: [] }, policies: { refs: [] } },
      },
    };
  }
  const names = publicNames(vpcKey);
  const pool = parseCidrBlock(side.pool);
  for (const [what, address] of [
    ['the router address', side.router.ip],
    ['the gateway', side.gateway],
    ...side.nats.map((nat) => [`the public IP of ${nat.instanceId}`, nat.publicIp]),
  ] as const) {
    const parsed = parseIp(address);
    if (
      parsed === null ||
      parsed.family !== 4 ||
      (parsed.value & ~((1n << BigInt(32 - pool.prefix)) - 1n)) !== pool.network
    ) {
      throw new Error(`OVN public side of ${vpcKey}: ${what} ${address} is not in the pool ${side.pool}`);
    }
  }
  const nats = [...side.nats].sort((a, b) => compare(a.publicIp, b.publicIp));
  // Instances going out through the router's own address are counted before its snat (snat-transfer.ts).
  const natted = new Set(nats.map((nat) => nat.instanceId));
  const policies =
    side.snatBlock === undefined
      ? []
      : meterPolicies(
          side.snatBlock,
          { private: metered.routerPort, public: names.routerPort },
          [...metered.instances]
            .filter((instance) => !natted.has(instance.instanceId))
            .sort((a, b) => compare(a.instanceId, b.instanceId)),
          [...metered.tunnels].sort(compare),
        );
  const rows: Row[] = [
    ...policies.map(
      (policy): Row => ({
        table: 'Logical_Router_Policy',
        key: names.policy(policy.name),
        columns: {
          priority: String(policy.priority),
          match: policy.match,
          action: 'allow',
          external_ids: ids(names.policy(policy.name), policy.externalIds),
        },
      }),
    ),
    {
      table: 'Gateway_Chassis',
      key: names.gatewayChassis,
      columns: {
        name: names.gatewayChassis,
        chassis_name: side.chassis,
        external_ids: ids(names.gatewayChassis),
      },
    },
    {
      table: 'Logical_Router_Port',
      key: names.routerPort,
      columns: {
        name: names.routerPort,
        mac: side.router.mac,
        networks: [`${side.router.ip}/${pool.prefix}`],
        gateway_chassis: { refs: [names.gatewayChassis] },
        external_ids: ids(names.routerPort),
      },
    },
    {
      table: 'Logical_Router_Static_Route',
      key: names.defaultRoute,
      columns: { ip_prefix: '0.0.0.0/0', nexthop: side.gateway, external_ids: ids(names.defaultRoute) },
    },
    ...nats.map(
      (nat): Row => ({
        table: 'NAT',
        key: names.nat(nat.publicIp),
        columns: {
          type: 'dnat_and_snat',
          external_ip: nat.publicIp,
          logical_ip: nat.privateIp,
          external_ids: ids(names.nat(nat.publicIp), { 'nimbus:instance': nat.instanceId }),
        },
      }),
    ),
    ...(side.snatBlock === undefined
      ? []
      : [
          {
            table: 'NAT',
            key: names.snat,
            columns: {
              type: 'snat',
              external_ip: side.router.ip,
              logical_ip: side.snatBlock,
              external_ids: ids(names.snat),
            },
          } satisfies Row,
        ]),
    {
      table: 'Logical_Switch_Port',
      key: names.localnetPort,
      columns: {
        name: names.localnetPort,
        type: 'localnet',
        addresses: ['unknown'],
        port_security: [],
        options: { network_name: PUBLIC_PHYSNET },
        dhcpv4_options: { refs: [] },
        external_ids: ids(names.localnetPort),
      },
    },
    routerAttachment(names.switchRouterPort, names.routerPort, ids(names.switchRouterPort)),
    {
      table: 'Logical_Switch',
      key: names.switch,
      columns: {
        name: names.switch,
        ports: { refs: [names.localnetPort, names.switchRouterPort] },
        external_ids: ids(names.switch),
      },
    },
  ];
  return {
    rows,
    router: {
      ports: [names.routerPort],
      columns: {
        nat: {
          refs: [
            ...nats.map((nat) => names.nat(nat.publicIp)),
            ...(side.snatBlock === undefined ? [] : [names.snat]),
          ],
        },
        static_routes: { refs: [names.defaultRoute] },
        policies: { refs: policies.map((policy) => names.policy(policy.name)) },
      },
    },
  };
}

/**
 * Each region's upstream router on the link: the pool's first address, except in the one region whose
 * pool holds `configured` (NIMBUS_PUBLIC_GATEWAY). A configured address in no pool, or a pool's network
 * or broadcast address, is refused.
 */
export function publicGateways(
  pools: Readonly<Record<string, string>>,
  configured: string | null,
): Record<string, string> {
  const gateways: Record<string, string> = {};
  let placed = configured === null;
  for (const [region, pool] of Object.entries(pools)) {
    gateways[region] = defaultPublicGateway(pool);
    if (configured === null) continue;
    const block = parseCidrBlock(pool);
    const ip = parseIp(configured);
    if (ip === null || ip.family !== 4) continue;
    const size = 1n << BigInt(32 - block.prefix);
    if (ip.value < block.network || ip.value >= block.network + size) continue;
    if (ip.value === block.network || ip.value === block.network + size - 1n) {
      throw new ConfigError(
        `Invalid configuration: NIMBUS_PUBLIC_GATEWAY ${configured} is the network or broadcast address of ${region}'s pool ${pool}`,
      );
    }
    gateways[region] = configured;
    placed = true;
  }
  if (!placed) {
    throw new ConfigError(
      `Invalid configuration: NIMBUS_PUBLIC_GATEWAY ${configured} is in no region's public pool (NIMBUS_PUBLIC_IP_POOLS: ${Object.entries(
        pools,
      )
        .map(([region, pool]) => `${region}=${pool}`)
        .join(',')})`,
    );
  }
  return gateways;
}

/** The router addresses on the public link, held in the store so no instance is given one (resources/addresses). */
export interface RouterAddressHolds {
  /**
   * The address the account's router holds in the region, held now if it held none; null when the pool
   * has none left (the VPC then has no public side, and its private network works as before).
   */
  hold(accountId: string, region: string): Promise<string | null>;
  /** Gives it back (the VPC is gone). */
  release(accountId: string, region: string): Promise<void>;
  /** Those held, of one account or of all. */
  held(accountId: string | null): Promise<{ accountId: string; region: string; ip: string }[]>;
  /** Holds the region's upstream router address when the pool would hand it out; refuses one held. */
  holdGateway(region: string, ip: string): Promise<void>;
}

/** What the network needs to give VPCs a public side: the link, its pools and gateways, the router addresses. */
export interface PublicLink {
  /** NIMBUS_PUBLIC_UPLINK. */
  uplink: string;
  /** Each region's pool (NIMBUS_PUBLIC_IP_POOLS and the defaults). */
  pools: Readonly<Record<string, string>>;
  /** Each region's upstream router (publicGateways). */
  gateways: Readonly<Record<string, string>>;
  routers: RouterAddressHolds;
}

/**
 * A VPC's public side: its router's address and MAC on the link, and a NAT per instance whose public IP
 * lies in the region's pool (one outside it, left by a pool configured otherwise since, gets none).
 */
export function publicSideOf(
  vpc: { key: string; region: string; cidr: string },
  instances: readonly { id: string; public_ip: string | null; private_ip: string }[],
  link: Pick<PublicLink, 'pools' | 'gateways'>,
  router: { ip: string; mac: string },
  chassis: string,
): VpcPublicSide | undefined {
  const pool = link.pools[vpc.region];
  const gateway = link.gateways[vpc.region];
  if (pool === undefined || gateway === undefined) return undefined;
  const block = parseCidrBlock(pool);
  const inPool = (address: string) => {
    const ip = parseIp(address);
    return (
      ip !== null &&
      ip.family === 4 &&
      ip.value >= block.network &&
      ip.value < block.network + (1n << BigInt(32 - block.prefix))
    );
  };
  return {
    pool,
    gateway,
    router,
    chassis,
    nats: instances.flatMap((instance) =>
      instance.public_ip !== null && inPool(instance.public_ip) && instance.public_ip !== router.ip
        ? [{ instanceId: instance.id, publicIp: instance.public_ip, privateIp: instance.private_ip }]
        : [],
    ),
    snatBlock: vpc.cidr,
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The provider bridge's name: derived from the integration bridge's, so it is as much the data
 * directory's own (two embedded OVNs on one host never share one) and fits IFNAMSIZ (15).
 */
export function providerBridgeName(integrationBridge: string): string {
  return `${integrationBridge.slice(0, 12)}-ex`;
}

/** `ovn-bridge-mappings` with `physnet` mapped to `bridge`, other networks' mappings kept. */
export function withBridgeMapping(mappings: string, physnet: string, bridge: string | null): string {
  const kept = mappings
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '' && entry.split(':')[0] !== physnet);
  return [...kept, ...(bridge === null ? [] : [`${physnet}:${bridge}`])].join(',');
}

async function bridgeMappings(ovn: OvnEndpoints): Promise<string> {
  const out = await vsctl(ovn, [
    '--if-exists',
    'get',
    'Open_vSwitch',
    '.',
    'external_ids:ovn-bridge-mappings',
  ]);
  const text = out.trim();
  return text.startsWith('"') ? (JSON.parse(text) as string) : text;
}

function vsctl(ovn: OvnEndpoints, args: readonly string[]): Promise<string> {
  return run('ovs-vsctl', [`--db=${ovn.ovsDb}`, ...args], { env: ovn.env, timeoutMs: 30_000 });
}

function mappingArgs(mappings: string): string[] {
  return mappings === ''
    ? ['remove', 'Open_vSwitch', '.', 'external_ids', 'ovn-bridge-mappings']
    : ['set', 'Open_vSwitch', '.', `external_ids:ovn-bridge-mappings=${JSON.stringify(mappings)}`];
}

/** How the uplink was before Nimbus plugged it, so that unplugging leaves it so. */
export interface UplinkState {
  up: boolean;
  txChecksumming: boolean;
}

/**
 * Plugs `uplink` (NIMBUS_PUBLIC_UPLINK) into this chassis' provider bridge, made on the userspace
 * datapath if missing, and maps PUBLIC_PHYSNET to it. Idempotent. The interface keeps no address: the
 * host itself is not on the public link, only the VPCs' routers are. Returns how the interface was.
 */
export async function plugUplink(
  ovn: OvnEndpoints,
  uplink: string,
): Promise<{ bridge: string; before: UplinkState }> {
  const link = await run('ip', ['-j', 'link', 'show', uplink]).catch(() => {
    throw new Error(`NIMBUS_PUBLIC_UPLINK names ${uplink}, which is not an interface of this host`);
  });
  const flags = (JSON.parse(link) as { flags?: string[] }[])[0]?.flags ?? [];
  const features = await run('ethtool', ['-k', uplink]);
  const before: UplinkState = {
    up: flags.includes('UP'),
    txChecksumming: /^tx-checksumming: on/m.test(features),
  };
  // The userspace datapath's conntrack (the NATs) drops packets whose checksum was left to the hardware.
  await run('ethtool', ['-K', uplink, 'tx', 'off']);
  await run('ip', ['link', 'set', uplink, 'up']);
  const bridge = providerBridgeName(ovn.integrationBridge);
  const mappings = withBridgeMapping(await bridgeMappings(ovn), PUBLIC_PHYSNET, bridge);
  await vsctl(ovn, [
    ...addNetdevBridge(bridge),
    '--',
    '--may-exist',
    'add-port',
    bridge,
    uplink,
    '--',
    ...mappingArgs(mappings),
  ]);
  return { bridge, before };
}

/**
 * Takes the uplink and the provider bridge out of OVS and the mapping off the chassis, and puts the
 * interface back as it was (`before`, when known).
 */
export async function unplugUplink(ovn: OvnEndpoints, uplink: string, before?: UplinkState): Promise<void> {
  const bridge = providerBridgeName(ovn.integrationBridge);
  const mappings = withBridgeMapping(await bridgeMappings(ovn), PUBLIC_PHYSNET, null);
  await vsctl(ovn, [
    '--if-exists',
    'del-port',
    bridge,
    uplink,
    '--',
    '--if-exists',
    'del-br',
    bridge,
    '--',
    ...mappingArgs(mappings),
  ]);
  if (before === undefined || !existsSync(`/sys/class/net/${uplink}`)) return;
  if (before.txChecksumming) await run('ethtool', ['-K', uplink, 'tx', 'on']);
  if (!before.up) await run('ip', ['link', 'set', uplink, 'down']);
}
