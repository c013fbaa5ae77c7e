/**
 * An instance's firewall as OVN rows (issue 31 item 4): a compiler, pure, from the instance's effective
 * rules — the very list the one evaluator walks (resources/networking/firewall-rules.ts, docs/api.md
 * "Firewall": user rules, then the preset's, then the defaults) — to a port group holding the
 * instance's logical port, its ACLs, and address sets for the rules' blocks.
 *
 * Equal verdicts by construction. The evaluator takes the first rule, in order, that matches; OVN takes
 * the matching ACL of highest priority. So rule i of a direction becomes one ACL at priority
 * RULES_TOP - i (inbound: to-lport on the instance's port, outbound: from-lport), whose match is the
 * conjunction of exactly the tests `matches` makes, each written as an OVN term:
 *   - protocol: tcp, udp, icmp (icmp4 or icmp6), or for `all` any IP packet (protocols the evaluator
 *     has no packet of, GRE say, are decided by the rules that say `all`);
 *   - ports: the destination port in the range (for `all` with ports: tcp or udp in the range);
 *   - remote address: in one of the rule's blocks. The evaluator judges an IPv4-mapped IPv6 address
 *     (::ffff:a.b.c.d) as the IPv4 address it carries, so an IPv6 packet from one matches the rule's
 *     IPv4 blocks (mapped into ::ffff:0:0/96) and never its IPv6 blocks.
 * A rule that can match no packet (no blocks; icmp with ports) gets no ACL. `allow` is `allow-related`:
 * the replies of a flow the firewall let through pass whatever the other direction's rules say, which
 * is what a stateful firewall means. `deny` is `drop`, so a closed port times out. A change applies to
 * open connections too: OVN runs every packet of a connection's first direction through the ACLs of the
 * moment, so one a new drop covers is cut (no reset is sent) and the others carry on untouched, whatever
 * priorities moved (test/ovn-firewall-established.test.ts).
 *
 * Around the rules, what keeps the network working and what the rules do not speak of: above every rule,
 * ARP and IPv6 neighbour discovery both ways and the guest's DHCP requests to the VPC's DHCP server
 * (OVN answers them itself); at the bottom, a drop of everything else (the rules speak of IP only, and
 * their defaults already decide every IP packet). When the network names them, also above every rule:
 * Nimbus's own traffic with the guest through the VPC's host port (network.ts: the host reaching the
 * guest's SSH to tell it booted and for the SSH proxy, which asks the firewall's verdict itself; the
 * guest reaching the metadata service), and the guest's DNS queries to the VPC's resolver (OVN answers
 * them from the switch's DNS records, dns-records.ts). Those, DHCP requests and neighbour discovery are
 * the only IP packets whose fate can differ from the evaluator's verdict: they pass even when a rule
 * denies.
 *
 * Rows carry the same marks as topology.ts's (`nimbus:key`, `nimbus:vpc`), so its diff owns them:
 * topology.ts's vpcRows adds `firewallRows` for every port given a firewall.
 */
import { createHash } from 'node:crypto';
import { type CidrBlock, formatCidr, parseCidrBlock } from '../../platform/domain/cidrs.js';
import {
  type EffectiveRule,
  effectiveRules,
  type FirewallPreset,
  type FirewallRule,
  parsePorts,
  selects,
} from '../../resources/networking/firewall-rules.js';
import type { Cell, Row } from './topology.js';

export type AclTable = 'ACL' | 'Address_Set' | 'Port_Group';

/** The columns Nimbus writes in the firewall's tables (topology.ts's COLUMNS includes them). */
export const ACL_COLUMNS = {
  ACL: {
    priority: 'integer',
    direction: 'string',
    match: 'string',
    action: 'string',
    external_ids: 'map',
  },
  Address_Set: { name: 'string', addresses: 'strings', external_ids: 'map' },
  Port_Group: { name: 'string', ports: 'refs', acls: 'refs', external_ids: 'map' },
} as const;

/** OVN's ACL priorities run 0–32767. */
export const NETWORK_SERVICES_PRIORITY = 32_767;
export const RULES_TOP = 32_766;
export const CATCH_ALL_PRIORITY = 0;
/** How many rules of one direction fit between the network services and the catch-all. */
export const MAX_RULES_PER_DIRECTION = RULES_TOP - CATCH_ALL_PRIORITY;

export type AclDirection = 'to-lport' | 'from-lport';
export type AclAction = 'allow' | 'allow-related' | 'drop';

export interface CompiledAcl {
  /** Unique among the VPC's rows, and stable while the rule it comes from exists. */
  key: string;
  direction: AclDirection;
  priority: number;
  match: string;
  action: AclAction;
  /** What it comes from: a user rule's id, `preset`, `default`, or `network` (the services and the catch-all). */
  origin: string;
}

export interface CompiledFirewall {
  portGroup: string;
  acls: CompiledAcl[];
  /** The address sets the ACLs name (`$name`), each with canonical blocks. */
  addressSets: { name: string; addresses: string[] }[];
}

export interface FirewallNetwork {
  /** The VPC's key (topology.ts vpcKey): address sets are named and shared within it. */
  vpc: string;
  /** The VPC's DHCP server (its router's address), which guests' DHCP requests go to once leased. */
  dhcpServer: string;
  /** The host port's address (169.254.169.254), through which Nimbus itself talks with the guests. */
  hostAddress?: string;
  /** The resolver DHCP gives the guests, whose DNS queries OVN answers. */
  resolver?: string;
}

/**
 * The effective rules of an instance, as the evaluator has them (NetworkService builds the same
 * InstanceFirewall for `/network/check`): the account's rules of the instance's region that select it,
 * enabled ones only, its preset's and the defaults for its private network. What the reconcile job
 * passes as a VpcPort's `firewall`, from the account's rules in the region and the instance record.
 */
export function aclInputsFor(
  instance: {
    id: string;
    account_id: string;
    region: string;
    tags: Record<string, string>;
    firewall_preset: string;
  },
  accountRules: readonly FirewallRule[],
  privateNetwork: string,
): EffectiveRule[] {
  return effectiveRules({
    rules: accountRules.filter((rule) => rule.account_id === instance.account_id && selects(rule, instance)),
    preset: instance.firewall_preset as FirewallPreset,
    privateNetwork,
  });
}

/** A name OVN takes for a port group or an address set: [a-zA-Z_.][a-zA-Z_.0-9]*. */
export function ovnName(text: string): string {
  return text.replace(/[^A-Za-z0-9_]/g, '_');
}

export function portGroupName(instanceId: string): string {
  return `nimbus_${ovnName(instanceId)}`;
}

/** IPv4-mapped IPv6 addresses: the evaluator judges them as IPv4 (cidrs.ts unmapped). */
const MAPPED = '::ffff:0:0/96';

function mappedBlock(block: CidrBlock): string {
  return formatCidr({ family: 6, network: (0xffffn << 32n) | block.network, prefix: 96 + block.prefix });
}

interface AddressTerms {
  /** The OVN term, or null when the blocks hold no address at all. */
  term: string | null;
  sets: { name: string; addresses: string[] }[];
}

/** "The remote address is in one of the blocks", for inbound (source) or outbound (destination). */
function addressTerms(blocks: readonly string[], side: 'src' | 'dst', vpc: string): AddressTerms {
  const parsed = blocks.map(parseCidrBlock);
  const v4 = unique(parsed.filter((b) => b.family === 4).map(formatCidr));
  const v6 = unique(parsed.filter((b) => b.family === 6).map(formatCidr));
  const mapped = unique(parsed.filter((b) => b.family === 4).map(mappedBlock));
  // Content-addressed, so rules (and instances) of a VPC with the same blocks share the sets.
  const digest = createHash('sha256')
    .update(JSON.stringify([v4, v6]))
    .digest('hex')
    .slice(0, 16);
  const base = `${ovnName(vpc)}_${digest}`;
  const sets: { name: string; addresses: string[] }[] = [];
  const terms: string[] = [];
  if (v4.length > 0) {
    sets.push({ name: `${base}_4`, addresses: v4 }, { name: `${base}_4in6`, addresses: mapped });
    terms.push(`ip4.${side} == $${base}_4`, `ip6.${side} == $${base}_4in6`);
  }
  if (v6.length > 0) {
    sets.push({ name: `${base}_6`, addresses: v6 });
    terms.push(`(ip6.${side} == $${base}_6 && ip6.${side} != ${MAPPED})`);
  }
  return { term: terms.length === 0 ? null : `(${terms.join(' || ')})`, sets };
}

function portTerm(protocol: 'tcp' | 'udp', ports: string): string {
  const { from, to } = parsePorts(ports);
  return from === to
    ? `${protocol}.dst == ${from}`
    : `${protocol}.dst >= ${from} && ${protocol}.dst <= ${to}`;
}

/** Protocol and ports as one term; null when no packet can match (icmp has no port). */
function protocolTerm(rule: EffectiveRule): string | null {
  const { protocol, ports } = rule;
  if (protocol === 'icmp') return ports === null ? '(icmp4 || icmp6)' : null;
  if (protocol === 'all') {
    return ports === null
      ? 'ip'
      : `((tcp && ${portTerm('tcp', ports)}) || (udp && ${portTerm('udp', ports)}))`;
  }
  return ports === null ? protocol : `${protocol} && ${portTerm(protocol, ports)}`;
}

/**
 * The ACLs, address sets and port group of one instance's firewall. `rules` in evaluation order, as
 * effectiveRules (or aclInputsFor) gives them.
 */
export function compileFirewall(
  instanceId: string,
  rules: readonly EffectiveRule[],
  network: FirewallNetwork,
): CompiledFirewall {
  const group = portGroupName(instanceId);
  const arriving = `outport == @${group}`;
  const leaving = `inport == @${group}`;
  const acls: CompiledAcl[] = [
    {
      key: `${group}:network:in`,
      direction: 'to-lport',
      priority: NETWORK_SERVICES_PRIORITY,
      match: `${arriving} && (arp || nd)`,
      action: 'allow',
      origin: 'network',
    },
    {
      key: `${group}:network:out`,
      direction: 'from-lport',
      priority: NETWORK_SERVICES_PRIORITY,
      match: `${leaving} && (arp || nd || (udp.src == 68 && udp.dst == 67 && ip4.dst == {255.255.255.255, ${network.dhcpServer}}))`,
      action: 'allow',
      origin: 'network',
    },
    {
      key: `${group}:catch-all:in`,
      direction: 'to-lport',
      priority: CATCH_ALL_PRIORITY,
      match: arriving,
      action: 'drop',
      origin: 'network',
    },
    {
      key: `${group}:catch-all:out`,
      direction: 'from-lport',
      priority: CATCH_ALL_PRIORITY,
      match: leaving,
      action: 'drop',
      origin: 'network',
    },
    ...networkServices(group, network),
  ];
  const sets = new Map<string, string[]>();
  const position = { inbound: 0, outbound: 0 };
  const seen = { preset: 0, default: 0 };
  for (const rule of rules) {
    const index = position[rule.direction]++;
    if (index >= MAX_RULES_PER_DIRECTION) {
      throw new Error(
        `OVN firewall of ${instanceId}: more than ${MAX_RULES_PER_DIRECTION} ${rule.direction} rules do not fit OVN's ACL priorities`,
      );
    }
    const ruleKey = rule.id ?? `${rule.source}-${seen[rule.source as 'preset' | 'default']++}`;
    const inbound = rule.direction === 'inbound';
    const addresses = addressTerms(
      inbound ? rule.sources : rule.destinations,
      inbound ? 'src' : 'dst',
      network.vpc,
    );
    const protocol = protocolTerm(rule);
    if (addresses.term === null || protocol === null) continue;
    for (const set of addresses.sets) sets.set(set.name, set.addresses);
    acls.push({
      key: `${group}:${rule.direction}:${ruleKey}`,
      direction: inbound ? 'to-lport' : 'from-lport',
      priority: RULES_TOP - index,
      match: `${inbound ? arriving : leaving} && ${protocol} && ${addresses.term}`,
      action: rule.action === 'allow' ? 'allow-related' : 'drop',
      origin: rule.id ?? rule.source,
    });
  }
  return {
    portGroup: group,
    acls,
    addressSets: [...sets].map(([name, addresses]) => ({ name, addresses })),
  };
}

/** Nimbus's own traffic and the VPC's resolver, as the network names them (see the top of the file). */
function networkServices(group: string, network: FirewallNetwork): CompiledAcl[] {
  const acls: CompiledAcl[] = [];
  const service = (key: string, direction: AclDirection, match: string): CompiledAcl => ({
    key: `${group}:${key}`,
    direction,
    priority: NETWORK_SERVICES_PRIORITY,
    match,
    // Stateful, so the replies pass whatever the other direction's rules say.
    action: 'allow-related',
    origin: 'network',
  });
  if (network.hostAddress !== undefined) {
    acls.push(
      service('host:in', 'to-lport', `outport == @${group} && ip4.src == ${network.hostAddress}`),
      service('host:out', 'from-lport', `inport == @${group} && ip4.dst == ${network.hostAddress}`),
    );
  }
  if (network.resolver !== undefined) {
    acls.push(
      service(
        'dns:out',
        'from-lport',
        `inport == @${group} && ip4.dst == ${network.resolver} && udp.dst == 53`,
      ),
    );
  }
  return acls;
}

export interface PortFirewallInput {
  /** The instance id, which is also its logical switch port's key (topology.ts). */
  instanceId: string;
  firewall: readonly EffectiveRule[];
}

/**
 * The rows of the firewalls of a VPC's ports: `ids(key, more)` gives the external_ids topology.ts puts
 * on every row of the VPC. Address sets used by several ports appear once.
 */
export function firewallRows(
  ports: readonly PortFirewallInput[],
  network: FirewallNetwork,
  ids: (rowKey: string, more?: Record<string, string>) => Record<string, string>,
): Row[] {
  const rows: Row[] = [];
  const sets = new Map<string, string[]>();
  for (const port of ports) {
    const compiled = compileFirewall(port.instanceId, port.firewall, network);
    const instance = { 'nimbus:instance': port.instanceId };
    for (const acl of compiled.acls) {
      const columns: Record<string, Cell> = {
        priority: String(acl.priority),
        direction: acl.direction,
        match: acl.match,
        action: acl.action,
        external_ids: ids(acl.key, { ...instance, 'nimbus:rule': acl.origin }),
      };
      rows.push({ table: 'ACL', key: acl.key, columns });
    }
    for (const set of compiled.addressSets) sets.set(set.name, set.addresses);
    rows.push({
      table: 'Port_Group',
      key: compiled.portGroup,
      columns: {
        name: compiled.portGroup,
        ports: { refs: [port.instanceId] },
        acls: { refs: compiled.acls.map((acl) => acl.key) },
        external_ids: ids(compiled.portGroup, instance),
      },
    });
  }
  for (const [name, addresses] of [...sets].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    rows.push({
      table: 'Address_Set',
      key: name,
      columns: { name, addresses, external_ids: ids(name) },
    });
  }
  return rows;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)].sort();
}
