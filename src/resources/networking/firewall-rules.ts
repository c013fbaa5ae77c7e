/**
 * Firewall rules and the one evaluator that decides a packet (docs/api.md, Firewall).
 *
 * An instance's effective rules, in evaluation order:
 *   1. the account's enabled rules that apply to it (by region and targets), for the packet's direction,
 *      by `priority` (lower first), then creation (older first), then id;
 *   2. its firewall preset's rules (inbound allows);
 *   3. the defaults: inbound from the account's private network in the region is allowed, then inbound
 *      is denied and outbound allowed.
 * The first rule that matches decides, allow or deny alike. Because the defaults match everything, every
 * packet has a verdict and a rule that gave it.
 */
import {
  type CidrBlock,
  cidrContains,
  type IpAddress,
  parseCidrBlock,
  unmapped,
} from '../../platform/domain/cidrs.js';
import type { FIREWALL_PRESETS } from '../instances/rules.js';
import type { FirewallRule } from './firewall-record.js';

export const DIRECTIONS = ['inbound', 'outbound'] as const;
export type Direction = (typeof DIRECTIONS)[number];
export const ACTIONS = ['allow', 'deny'] as const;
export type Action = (typeof ACTIONS)[number];
export const PROTOCOLS = ['tcp', 'udp', 'icmp', 'all'] as const;
export type Protocol = (typeof PROTOCOLS)[number];
/** What a packet can carry (a rule may also say `all`). */
export const PACKET_PROTOCOLS = ['tcp', 'udp', 'icmp'] as const;
export type PacketProtocol = (typeof PACKET_PROTOCOLS)[number];
export type FirewallPreset = (typeof FIREWALL_PRESETS)[number];

export const PRIORITY = { min: 1, max: 65_535 } as const;
export const PORT = { min: 1, max: 65_535 } as const;
/** Addresses per `sources` or `destinations` list. */
export const MAX_ADDRESSES = 100;
export const MAX_TARGET_INSTANCES = 100;
export const MAX_TARGET_TAGS = 10;
export const MAX_DESCRIPTION_LENGTH = 500;
export const ANYWHERE = ['0.0.0.0/0', '::/0'] as const;
export const FIREWALL_RULE_SORTS = ['priority', 'created_at', 'name'] as const;

export interface FirewallTargets {
  instance_ids: string[];
  tags: Record<string, string>;
}

/** A stored rule, decoded: declared once, as a TypeBox record (firewall-record.ts). */
export type { FirewallRule };

export type RuleOrigin = 'rule' | 'preset' | 'default';

/** A rule as evaluation sees it: a user rule, a preset's, or a default. */
export interface EffectiveRule {
  source: RuleOrigin;
  /** The user rule's id; null for presets and defaults. */
  id: string | null;
  name: string;
  direction: Direction;
  action: Action;
  protocol: Protocol;
  ports: string | null;
  /** Inbound: the remote addresses it covers; outbound: empty. */
  sources: string[];
  /** Outbound: the remote addresses it covers; inbound: empty. */
  destinations: string[];
  /** The user rule's priority; null for presets and defaults (they come after every user rule). */
  priority: number | null;
}

export interface Packet {
  direction: Direction;
  protocol: PacketProtocol;
  /** tcp and udp only. */
  port: number | null;
  /** The remote end: the source of an inbound packet, the destination of an outbound one. */
  address: IpAddress;
}

export interface Verdict {
  verdict: Action;
  matched_rule: EffectiveRule;
}

export interface PortRange {
  from: number;
  to: number;
}

/** Why a `ports` value is refused; null when it is fine. */
export function portsProblem(ports: string): string | null {
  const match = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(ports);
  if (!match) return 'ports is one port ("22") or a range ("8000-8100") of decimal numbers';
  const from = Number(match[1]);
  const to = match[2] === undefined ? from : Number(match[2]);
  for (const port of [from, to]) {
    if (port < PORT.min || port > PORT.max) return `ports must be between ${PORT.min} and ${PORT.max}`;
  }
  if (from > to) return `the range ${ports} is reversed: write ${to}-${from}`;
  return null;
}

/** The range a valid `ports` value covers. */
export function parsePorts(ports: string): PortRange {
  const [from, to] = ports.split('-').map(Number) as [number, number | undefined];
  return { from, to: to ?? from };
}

/** The canonical spelling: leading zeros dropped, a one-port range as the port. */
export function formatPorts(range: PortRange): string {
  return range.from === range.to ? String(range.from) : `${range.from}-${range.to}`;
}

/**
 * Whether the rule's region and targets select an instance (the caller checks the account), enabled or
 * not: empty targets select every instance of the region; otherwise an instance named in `instance_ids`,
 * or one carrying every tag of `tags`.
 */
export function selects(
  rule: Pick<FirewallRule, 'region' | 'targets'>,
  instance: { id: string; region: string; tags: Record<string, string> },
): boolean {
  if (rule.region !== instance.region) return false;
  const { instance_ids: ids, tags } = rule.targets;
  const tagPairs = Object.entries(tags);
  if (ids.length === 0 && tagPairs.length === 0) return true;
  if (ids.includes(instance.id)) return true;
  return tagPairs.length > 0 && tagPairs.every(([key, value]) => instance.tags[key] === value);
}

const SSH = { protocol: 'tcp', port: '22', name: 'SSH' } as const;
const PRESET_OPENINGS: Record<FirewallPreset, { protocol: Protocol; port: string | null; name: string }[]> = {
  'ssh-only': [SSH],
  web: [SSH, { protocol: 'tcp', port: '80', name: 'HTTP' }, { protocol: 'tcp', port: '443', name: 'HTTPS' }],
  'allow-all': [{ protocol: 'all', port: null, name: 'everything' }],
  none: [],
};

/** The preset's implicit rules: inbound allows from anywhere. `none` has none. */
export function presetRules(preset: FirewallPreset): EffectiveRule[] {
  return PRESET_OPENINGS[preset].map((opening) => ({
    source: 'preset',
    id: null,
    name: `${preset}: allow ${opening.name}`,
    direction: 'inbound',
    action: 'allow',
    protocol: opening.protocol,
    ports: opening.port,
    sources: [...ANYWHERE],
    destinations: [],
    priority: null,
  }));
}

/** The rules below every user rule and preset: private network allowed, then the default policy. */
export function defaultRules(privateNetwork: string): EffectiveRule[] {
  const rule = (name: string, direction: Direction, action: Action, remote: string[]): EffectiveRule => ({
    source: 'default',
    id: null,
    name,
    direction,
    action,
    protocol: 'all',
    ports: null,
    sources: direction === 'inbound' ? remote : [],
    destinations: direction === 'outbound' ? remote : [],
    priority: null,
  });
  return [
    rule('allow inbound from your private network', 'inbound', 'allow', [privateNetwork]),
    rule('deny all other inbound', 'inbound', 'deny', [...ANYWHERE]),
    rule('allow all outbound', 'outbound', 'allow', [...ANYWHERE]),
  ];
}

function userOrder(a: FirewallRule, b: FirewallRule): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export function effectiveOf(rule: FirewallRule): EffectiveRule {
  return {
    source: 'rule',
    id: rule.id,
    name: rule.name,
    direction: rule.direction,
    action: rule.action,
    protocol: rule.protocol,
    ports: rule.ports,
    sources: rule.sources,
    destinations: rule.destinations,
    priority: rule.priority,
  };
}

export interface InstanceFirewall {
  /** The account's rules that select the instance (see selects); disabled ones are skipped here. */
  rules: readonly FirewallRule[];
  preset: FirewallPreset;
  /** The account's private network in the instance's region. */
  privateNetwork: string;
}

/** Every rule that can decide a packet for the instance, in evaluation order. */
export function effectiveRules(firewall: InstanceFirewall): EffectiveRule[] {
  const user = firewall.rules.filter((rule) => rule.enabled).sort(userOrder);
  return [
    ...user.map(effectiveOf),
    ...presetRules(firewall.preset),
    ...defaultRules(firewall.privateNetwork),
  ];
}

const blocks = new Map<string, CidrBlock>();
function blockOf(cidr: string): CidrBlock {
  let block = blocks.get(cidr);
  if (!block) {
    block = parseCidrBlock(cidr);
    if (blocks.size > 10_000) blocks.clear();
    blocks.set(cidr, block);
  }
  return block;
}

/** Whether one rule covers the packet: direction, protocol, port and remote address. */
export function matches(rule: EffectiveRule, packet: Packet): boolean {
  if (rule.direction !== packet.direction) return false;
  if (rule.protocol !== 'all' && rule.protocol !== packet.protocol) return false;
  if (rule.ports !== null) {
    if (packet.port === null) return false;
    const range = parsePorts(rule.ports);
    if (packet.port < range.from || packet.port > range.to) return false;
  }
  const remote = unmapped(packet.address);
  const addresses = packet.direction === 'inbound' ? rule.sources : rule.destinations;
  return addresses.some((cidr) => cidrContains(blockOf(cidr), remote));
}

/** What decides when no rule matches: inbound denied, outbound allowed (the last two defaults). */
const POLICY: Record<Direction, EffectiveRule> = {
  inbound: defaultRules('0.0.0.0/32')[1] as EffectiveRule,
  outbound: defaultRules('0.0.0.0/32')[2] as EffectiveRule,
};

/**
 * The evaluator: the first rule, in the order given, that matches the packet decides. Rules come from
 * effectiveRules, whose defaults match every packet; given a list without them, the default policy decides.
 */
export function evaluate(rules: readonly EffectiveRule[], packet: Packet): Verdict {
  const matched = rules.find((rule) => matches(rule, packet)) ?? POLICY[packet.direction];
  return { verdict: matched.action, matched_rule: matched };
}

/** The evaluator over an instance's firewall: effectiveRules, then evaluate. */
export function decide(firewall: InstanceFirewall, packet: Packet): Verdict {
  return evaluate(effectiveRules(firewall), packet);
}
