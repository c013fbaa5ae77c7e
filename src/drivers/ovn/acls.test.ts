/**
 * The firewall compiler against the evaluator, without OVN: the compiled ACLs are read back by a small
 * interpreter of OVN's match language (the part the compiler writes: &&, ||, !, parentheses, the
 * relational operators, sets, $address_set and @port_group, the prerequisites of fields as OVN adds
 * them) and OVN's choice (the matching ACL of highest priority in the packet's stage), and for random
 * rule sets and packets the fate equals the verdict of `decide`, the function `/network/check` answers
 * with. test/ovn-firewall.test.ts does the same with real packets through OVN.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { denyEverything, firewallRule } from '../../../test/helpers/firewall.js';
import {
  cidrContains,
  formatCidr,
  formatIp,
  type IpAddress,
  parseCidrBlock,
  parseIp,
} from '../../platform/domain/cidrs.js';
import { FIREWALL_PRESETS } from '../../resources/instances/rules.js';
import {
  ACTIONS,
  DIRECTIONS,
  decide,
  type FirewallRule,
  type FirewallTargets,
  formatPorts,
  PACKET_PROTOCOLS,
  type Packet,
  PROTOCOLS,
  parsePorts,
  selects,
} from '../../resources/networking/firewall-rules.js';
import {
  aclInputsFor,
  type CompiledFirewall,
  compileFirewall,
  MAX_RULES_PER_DIRECTION,
  portGroupName,
} from './acls.js';
import { type DesiredVpc, diffRows, type ExistingRow, vpcKey, vpcRows } from './topology.js';

// ---- A wire packet, and OVN's match language over it -------------------------------------------

interface WirePacket {
  inport: string;
  outport: string;
  kind: 'arp' | 'ip';
  src?: IpAddress;
  dst?: IpAddress;
  /** IP protocol number: 6 tcp, 17 udp, 1 icmp4, 58 icmp6, or any other. */
  proto?: number;
  srcPort?: number;
  dstPort?: number;
  icmpType?: number;
  ttl?: number;
}

type Value = { kind: 'int'; value: number } | { kind: 'cidr'; block: ReturnType<typeof parseCidrBlock> };
type Operand =
  | { kind: 'values'; values: Value[] }
  | { kind: 'addressSet'; name: string }
  | { kind: 'portGroup'; name: string };
type Expr =
  | { kind: 'and' | 'or'; parts: Expr[] }
  | { kind: 'not'; inner: Expr }
  | { kind: 'predicate'; name: string }
  | { kind: 'compare'; field: string; op: string; operand: Operand };

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  const pattern =
    /\s*(&&|\|\||==|!=|>=|<=|[<>!(){},]|[$@][A-Za-z_.][A-Za-z0-9_.]*|[A-Za-z0-9_.:]+(?:\/\d+)?)/y;
  let at = 0;
  while (at < text.length) {
    pattern.lastIndex = at;
    const match = pattern.exec(text);
    if (!match) {
      if (text.slice(at).trim() === '') break;
      throw new Error(`cannot read the match at ${JSON.stringify(text.slice(at))}`);
    }
    tokens.push(match[1]!);
    at = pattern.lastIndex;
  }
  return tokens;
}

function parseMatch(text: string): Expr {
  const tokens = tokenize(text);
  let i = 0;
  const peek = () => tokens[i];
  const take = (expected?: string) => {
    const token = tokens[i++];
    if (token === undefined || (expected !== undefined && token !== expected)) {
      throw new Error(`expected ${expected ?? 'more'} at token ${i} of ${JSON.stringify(text)}`);
    }
    return token;
  };
  const value = (token: string): Value => {
    if (/^\d+$/.test(token)) return { kind: 'int', value: Number(token) };
    return { kind: 'cidr', block: parseCidrBlock(token) };
  };
  const operand = (): Operand => {
    const token = take();
    if (token.startsWith('$')) return { kind: 'addressSet', name: token.slice(1) };
    if (token.startsWith('@')) return { kind: 'portGroup', name: token.slice(1) };
    if (token !== '{') return { kind: 'values', values: [value(token)] };
    const values: Value[] = [];
    for (;;) {
      values.push(value(take()));
      if (take() === '}') return { kind: 'values', values };
    }
  };
  const primary = (): Expr => {
    const token = take();
    if (token === '!') return { kind: 'not', inner: primary() };
    if (token === '(') {
      const inner = or();
      take(')');
      return inner;
    }
    if (['==', '!=', '>=', '<=', '<', '>'].includes(peek() ?? '')) {
      return { kind: 'compare', field: token, op: take(), operand: operand() };
    }
    return { kind: 'predicate', name: token };
  };
  const and = (): Expr => {
    const parts = [primary()];
    while (peek() === '&&') {
      take();
      parts.push(primary());
    }
    return parts.length === 1 ? parts[0]! : { kind: 'and', parts };
  };
  const or = (): Expr => {
    const parts = [and()];
    while (peek() === '||') {
      take();
      parts.push(and());
    }
    return parts.length === 1 ? parts[0]! : { kind: 'or', parts };
  };
  const expr = or();
  if (i !== tokens.length)
    throw new Error(`left over in ${JSON.stringify(text)}: ${tokens.slice(i).join(' ')}`);
  return expr;
}

const PREDICATES: Record<string, (p: WirePacket) => boolean> = {
  ip: (p) => p.kind === 'ip',
  ip4: (p) => p.kind === 'ip' && p.src?.family === 4,
  ip6: (p) => p.kind === 'ip' && p.src?.family === 6,
  tcp: (p) => p.kind === 'ip' && p.proto === 6,
  udp: (p) => p.kind === 'ip' && p.proto === 17,
  icmp4: (p) => PREDICATES.ip4!(p) && p.proto === 1,
  icmp6: (p) => PREDICATES.ip6!(p) && p.proto === 58,
  arp: (p) => p.kind === 'arp',
  nd: (p) => PREDICATES.icmp6!(p) && (p.icmpType === 135 || p.icmpType === 136) && p.ttl === 255,
};

/** A field's value and its prerequisite, which OVN adds to every comparison of it, == and != alike. */
function field(name: string, p: WirePacket): { ok: boolean; value?: number | string | IpAddress } {
  switch (name) {
    case 'inport':
      return { ok: true, value: p.inport };
    case 'outport':
      return { ok: true, value: p.outport };
    case 'ip4.src':
      return { ok: PREDICATES.ip4!(p), value: p.src };
    case 'ip4.dst':
      return { ok: PREDICATES.ip4!(p), value: p.dst };
    case 'ip6.src':
      return { ok: PREDICATES.ip6!(p), value: p.src };
    case 'ip6.dst':
      return { ok: PREDICATES.ip6!(p), value: p.dst };
    case 'tcp.src':
    case 'udp.src':
      return { ok: PREDICATES[name.slice(0, 3)]!(p), value: p.srcPort };
    case 'tcp.dst':
    case 'udp.dst':
      return { ok: PREDICATES[name.slice(0, 3)]!(p), value: p.dstPort };
    default:
      throw new Error(`the interpreter does not know the field ${name}`);
  }
}

function holds(expr: Expr, p: WirePacket, compiled: CompiledFirewall, negated = false): boolean {
  switch (expr.kind) {
    case 'and':
    case 'or': {
      // OVN pushes a negation down to the comparisons (De Morgan), flipping each operator.
      const all = (expr.kind === 'and') !== negated;
      const results = expr.parts.map((part) => holds(part, p, compiled, negated));
      return all ? results.every(Boolean) : results.some(Boolean);
    }
    case 'not':
      return holds(expr.inner, p, compiled, !negated);
    case 'predicate': {
      if (negated) throw new Error(`the compiler never negates a predicate (${expr.name})`);
      const predicate = PREDICATES[expr.name];
      if (!predicate) throw new Error(`the interpreter does not know the predicate ${expr.name}`);
      return predicate(p);
    }
    case 'compare': {
      const { ok, value } = field(expr.field, p);
      if (!ok || value === undefined) return false;
      const op = negated
        ? ({ '==': '!=', '!=': '==', '>=': '<', '<=': '>', '<': '>=', '>': '<=' }[expr.op] ?? '')
        : expr.op;
      const equal = (candidate: Value | string): boolean => {
        if (typeof candidate === 'string') return candidate === value;
        if (candidate.kind === 'int') return candidate.value === value;
        return typeof value === 'object' && cidrContains(candidate.block, value);
      };
      let candidates: (Value | string)[];
      if (expr.operand.kind === 'values') candidates = expr.operand.values;
      else if (expr.operand.kind === 'portGroup') {
        if (expr.operand.name !== compiled.portGroup)
          throw new Error(`unknown port group ${expr.operand.name}`);
        candidates = [instancePort];
      } else {
        const name = expr.operand.name;
        const set = compiled.addressSets.find((s) => s.name === name);
        if (!set) throw new Error(`the match names $${name}, which the compiled rows do not hold`);
        candidates = set.addresses.map((a): Value => ({ kind: 'cidr', block: parseCidrBlock(a) }));
      }
      if (op === '==') return candidates.some(equal);
      if (op === '!=') return !candidates.some(equal);
      const [bound] = candidates as Value[];
      if (candidates.length !== 1 || bound?.kind !== 'int' || typeof value !== 'number') {
        throw new Error(`${expr.field} ${op}: one integer only`);
      }
      return op === '>='
        ? value >= bound.value
        : op === '<='
          ? value <= bound.value
          : op === '<'
            ? value < bound.value
            : value > bound.value;
    }
  }
}

/** OVN's decision for the instance's port: the matching ACL of highest priority in the packet's stage. */
function fate(compiled: CompiledFirewall, p: WirePacket, stage: 'to-lport' | 'from-lport'): 'allow' | 'deny' {
  const matching = compiled.acls.filter(
    (acl) => acl.direction === stage && holds(parseMatch(acl.match), p, compiled),
  );
  if (matching.length === 0) return 'allow';
  const top = Math.max(...matching.map((acl) => acl.priority));
  const actions = new Set(matching.filter((acl) => acl.priority === top).map((acl) => acl.action));
  // Two actions at one priority would leave the choice to OVN: the compiler must never make that.
  expect(actions.size).toBe(1);
  return [...actions][0] === 'drop' ? 'deny' : 'allow';
}

// ---- Firewalls and packets ----------------------------------------------------------------------

const instancePort = 'ins_target';
const INSTANCE = { id: instancePort, account_id: 'acct_x', region: 'us-east-1', tags: { role: 'web' } };
const INSTANCE_V4: IpAddress = parseIp('10.10.0.10')!;
const INSTANCE_V6: IpAddress = parseIp('fd00::10')!;
const NETWORK = { vpc: 'nimbus-acct_x-us-east-1', dhcpServer: '10.10.0.1' };
const PRIVATE = '10.10.0.0/16';

const v4 = fc.integer({ min: 0, max: 2 ** 32 - 1 }).map((n): IpAddress => ({ family: 4, value: BigInt(n) }));
const v6 = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }).map((value): IpAddress => ({ family: 6, value }));
/** IPv4-mapped IPv6 (::ffff:a.b.c.d): the evaluator judges these as IPv4. */
const mapped = v4.map((a): IpAddress => ({ family: 6, value: (0xffffn << 32n) | a.value }));
const anyPort = fc.integer({ min: 1, max: 65_535 });
const portRange = fc
  .tuple(anyPort, fc.integer({ min: 0, max: 40 }))
  .map(([from, width]) => formatPorts({ from, to: Math.min(65_535, from + width) }));

function blockAround(address: IpAddress, prefix: number): string {
  const bits = address.family === 4 ? 32 : 128;
  const p = Math.min(prefix, bits);
  const host = (1n << BigInt(bits - p)) - 1n;
  return formatCidr({ family: address.family, prefix: p, network: address.value & ~host });
}

const rule: fc.Arbitrary<FirewallRule> = fc
  .record({
    direction: fc.constantFrom(...DIRECTIONS),
    action: fc.constantFrom(...ACTIONS),
    protocol: fc.constantFrom(...PROTOCOLS),
    ports: portRange,
    remote: fc.array(
      fc.tuple(fc.oneof(v4, v6, mapped, fc.constant(INSTANCE_V4)), fc.integer({ min: 0, max: 128 })),
      { minLength: 0, maxLength: 3 },
    ),
    priority: fc.integer({ min: 1, max: 20 }),
    enabled: fc.boolean(),
    second: fc.integer({ min: 0, max: 59 }),
    targets: fc.constantFrom<FirewallTargets>(
      { instance_ids: [], tags: {} },
      { instance_ids: [instancePort], tags: {} },
      { instance_ids: [], tags: { role: 'web' } },
      { instance_ids: [], tags: { role: 'db' } },
    ),
  })
  .map(({ remote, second, ...fields }) =>
    firewallRule({
      ...fields,
      remote: [...new Set(remote.map(([a, prefix]) => blockAround(a, prefix)))],
      createdSecond: second,
    }),
  );

const firewall = fc.record({
  rules: fc.array(rule, { maxLength: 8 }),
  preset: fc.constantFrom(...FIREWALL_PRESETS),
});

/** Packets near what the rules name (inside and just outside their blocks and ports), and anywhere. */
function packetsFor(rules: readonly FirewallRule[]): fc.Arbitrary<Packet[]> {
  const blocks = [PRIVATE, ...rules.flatMap((r) => [...r.sources, ...r.destinations])].map(parseCidrBlock);
  const near = fc
    .tuple(fc.constantFrom(...blocks), fc.bigInt({ min: -2n, max: 1n << 40n }))
    .map(([block, offset]) => {
      const bits = block.family === 4 ? 32n : 128n;
      const size = 1n << (bits - BigInt(block.prefix));
      const value =
        (((block.network + (offset % (size + 2n)) - 1n) % (1n << bits)) + (1n << bits)) % (1n << bits);
      return { family: block.family, value } as IpAddress;
    });
  const edges = rules.flatMap((r) => {
    if (r.ports === null) return [];
    const { from, to } = parsePorts(r.ports);
    return [from - 1, from, to, to + 1].filter((port) => port >= 1 && port <= 65_535);
  });
  const port = edges.length > 0 ? fc.oneof(anyPort, fc.constantFrom(...edges)) : anyPort;
  const address = fc.oneof(near, near.map(toMapped), v4, v6, mapped);
  return fc.array(
    fc
      .record({
        direction: fc.constantFrom(...DIRECTIONS),
        protocol: fc.constantFrom(...PACKET_PROTOCOLS),
        port,
        address,
      })
      .map((p): Packet => ({ ...p, port: p.protocol === 'icmp' ? null : p.port })),
    { minLength: 1, maxLength: 25 },
  );
}

function toMapped(address: IpAddress): IpAddress {
  return address.family === 4 ? { family: 6, value: (0xffffn << 32n) | address.value } : address;
}

/** The packet as it is on the wire, at the instance's logical port. An address stays in its family. */
function onTheWire(packet: Packet, sourcePort: number): WirePacket {
  const local = packet.address.family === 4 ? INSTANCE_V4 : INSTANCE_V6;
  const inbound = packet.direction === 'inbound';
  const proto =
    packet.protocol === 'tcp' ? 6 : packet.protocol === 'udp' ? 17 : packet.address.family === 4 ? 1 : 58;
  return {
    inport: inbound ? 'ins_remote' : instancePort,
    outport: inbound ? instancePort : 'ins_remote',
    kind: 'ip',
    src: inbound ? packet.address : local,
    dst: inbound ? local : packet.address,
    proto,
    ...(packet.port === null
      ? { icmpType: packet.address.family === 4 ? 8 : 128, ttl: 64 }
      : { srcPort: sourcePort, dstPort: packet.port }),
  };
}

const stageOf = (direction: Packet['direction']) => (direction === 'inbound' ? 'to-lport' : 'from-lport');

function firewallOf(rules: readonly FirewallRule[], preset: (typeof FIREWALL_PRESETS)[number]) {
  // As NetworkService builds it for /network/check: the rules that select the instance, its preset,
  // its private network.
  return { rules: rules.filter((r) => selects(r, INSTANCE)), preset, privateNetwork: PRIVATE };
}

describe('the OVN firewall compiler', () => {
  it('decides every packet as the evaluator does (ACLs interpreted as OVN reads them)', () => {
    fc.assert(
      fc.property(
        firewall.chain((f) =>
          fc.tuple(fc.constant(f), packetsFor(f.rules), fc.integer({ min: 1024, max: 65_535 })),
        ),
        ([{ rules, preset }, packets, sourcePort]) => {
          const compiled = compileFirewall(
            instancePort,
            aclInputsFor({ ...INSTANCE, firewall_preset: preset }, rules, PRIVATE),
            NETWORK,
          );
          for (const packet of packets) {
            const expected = decide(firewallOf(rules, preset), packet).verdict;
            const got = fate(compiled, onTheWire(packet, sourcePort), stageOf(packet.direction));
            if (got !== expected) {
              throw new Error(
                `${packet.direction} ${packet.protocol} ${packet.port ?? ''} ${formatIp(packet.address)}: OVN ${got}, evaluator ${expected}`,
              );
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('lets ARP, neighbour discovery and DHCP to the VPC through whatever the rules say', () => {
    const compiled = compileFirewall(
      instancePort,
      aclInputsFor({ ...INSTANCE, firewall_preset: 'allow-all' }, denyEverything('acct_x'), PRIVATE),
      NETWORK,
    );
    const arp = (inbound: boolean): WirePacket => ({
      inport: inbound ? 'x' : instancePort,
      outport: inbound ? instancePort : 'x',
      kind: 'arp',
    });
    const nd: WirePacket = {
      inport: instancePort,
      outport: 'x',
      kind: 'ip',
      src: parseIp('fe80::1')!,
      dst: parseIp('ff02::1:ff00:1')!,
      proto: 58,
      icmpType: 135,
      ttl: 255,
    };
    const dhcp = (to: string): WirePacket => ({
      inport: instancePort,
      outport: 'x',
      kind: 'ip',
      src: parseIp('0.0.0.0')!,
      dst: parseIp(to)!,
      proto: 17,
      srcPort: 68,
      dstPort: 67,
    });
    expect(fate(compiled, arp(true), 'to-lport')).toBe('allow');
    expect(fate(compiled, arp(false), 'from-lport')).toBe('allow');
    expect(fate(compiled, nd, 'from-lport')).toBe('allow');
    expect(fate(compiled, { ...nd, inport: 'x', outport: instancePort }, 'to-lport')).toBe('allow');
    expect(fate(compiled, dhcp('255.255.255.255'), 'from-lport')).toBe('allow');
    expect(fate(compiled, dhcp('10.10.0.1'), 'from-lport')).toBe('allow');
    // Only to the VPC's own DHCP server: elsewhere, the rules decide (here: denied).
    expect(fate(compiled, dhcp('198.51.100.7'), 'from-lport')).toBe('deny');
    // ND's look-alike without the hop limit of 255 is an ordinary ICMPv6 packet.
    expect(fate(compiled, { ...nd, ttl: 64 }, 'from-lport')).toBe('deny');
    // Anything else that is not IP at all falls to the catch-all.
    expect(
      fate(
        compiled,
        { inport: 'x', outport: instancePort, kind: 'ip', proto: 47, src: INSTANCE_V4, dst: INSTANCE_V4 },
        'to-lport',
      ),
    ).toBe('deny');
  });

  it("lets Nimbus's own traffic through the host port, and DNS queries to the resolver, through whatever the rules say", () => {
    const host = '169.254.169.254';
    const services = { ...NETWORK, hostAddress: host, resolver: '10.10.0.1' };
    const compiled = compileFirewall(
      instancePort,
      aclInputsFor({ ...INSTANCE, firewall_preset: 'none' }, denyEverything('acct_x'), PRIVATE),
      services,
    );
    const tcp = (inbound: boolean, remote: string, port: number): WirePacket => ({
      inport: inbound ? 'x' : instancePort,
      outport: inbound ? instancePort : 'x',
      kind: 'ip',
      src: inbound ? parseIp(remote)! : INSTANCE_V4,
      dst: inbound ? INSTANCE_V4 : parseIp(remote)!,
      proto: 6,
      srcPort: 40_000,
      dstPort: port,
    });
    const dns = (to: string, proto = 17): WirePacket => ({
      inport: instancePort,
      outport: 'x',
      kind: 'ip',
      src: INSTANCE_V4,
      dst: parseIp(to)!,
      proto,
      srcPort: 40_000,
      dstPort: 53,
    });
    // The host reaching the guest's SSH (readiness, the SSH forward), the guest reaching the metadata.
    expect(fate(compiled, tcp(true, host, 22), 'to-lport')).toBe('allow');
    expect(fate(compiled, tcp(false, host, 80), 'from-lport')).toBe('allow');
    expect(fate(compiled, dns('10.10.0.1'), 'from-lport')).toBe('allow');
    // Only those: another link-local source, another resolver, DNS over TCP are the rules' to decide.
    expect(fate(compiled, tcp(true, '169.254.169.253', 22), 'to-lport')).toBe('deny');
    expect(fate(compiled, tcp(true, '10.10.0.20', 22), 'to-lport')).toBe('deny');
    expect(fate(compiled, dns('198.51.100.7'), 'from-lport')).toBe('deny');
    expect(fate(compiled, dns('10.10.0.1', 6), 'from-lport')).toBe('deny');
    // Without them named (a network with no host port), none of these ACLs exist.
    const bare = compileFirewall(
      instancePort,
      aclInputsFor({ ...INSTANCE, firewall_preset: 'none' }, denyEverything('acct_x'), PRIVATE),
      NETWORK,
    );
    expect(fate(bare, tcp(true, host, 22), 'to-lport')).toBe('deny');
    expect(fate(bare, dns('10.10.0.1'), 'from-lport')).toBe('deny');
  });

  it('makes rows the topology diff owns: unique keys, references that resolve, idempotent', () => {
    fc.assert(
      fc.property(firewall, firewall, ({ rules, preset }, other) => {
        const vpc = (r: readonly FirewallRule[], p: typeof preset): DesiredVpc => ({
          accountId: 'acct_x',
          region: 'us-east-1',
          cidr: PRIVATE,
          router: { ip: '10.10.0.1', mac: '0a:58:0a:0a:00:01' },
          ports: [
            {
              instanceId: instancePort,
              mac: '0a:00:00:00:00:10',
              ip: '10.10.0.10',
              hostname: 't',
              firewall: aclInputsFor({ ...INSTANCE, firewall_preset: p }, r, PRIVATE),
            },
            {
              instanceId: 'ins_second',
              mac: '0a:00:00:00:00:11',
              ip: '10.10.0.11',
              hostname: 's',
              firewall: aclInputsFor({ ...INSTANCE, id: 'ins_second', firewall_preset: 'web' }, r, PRIVATE),
            },
            { instanceId: 'ins_bare', mac: '0a:00:00:00:00:12', ip: '10.10.0.12', hostname: 'b' },
          ],
        });
        const rows = vpcRows(vpc(rules, preset));
        const keys = rows.map((row) => row.key);
        expect(new Set(keys).size).toBe(keys.length);
        for (const row of rows) {
          expect(row.columns.external_ids).toMatchObject({
            'nimbus:key': row.key,
            'nimbus:vpc': vpcKey(vpc(rules, preset)),
          });
          for (const cell of Object.values(row.columns)) {
            if (typeof cell === 'object' && 'refs' in cell)
              for (const ref of cell.refs as string[]) expect(keys).toContain(ref);
          }
        }
        // Every ACL belongs to a port group, every $set a match names is a row; a port without a firewall has none.
        const groups = rows.filter((row) => row.table === 'Port_Group');
        expect(groups.map((g) => g.columns.name).sort()).toEqual(
          [portGroupName(instancePort), portGroupName('ins_second')].sort(),
        );
        const owned = new Set(groups.flatMap((g) => (g.columns.acls as { refs: string[] }).refs));
        const acls = rows.filter((row) => row.table === 'ACL');
        expect(new Set(acls.map((a) => a.key))).toEqual(owned);
        const setNames = new Set(
          rows.filter((row) => row.table === 'Address_Set').map((row) => row.columns.name),
        );
        for (const acl of acls) {
          for (const [, name] of (acl.columns.match as string).matchAll(/\$([A-Za-z0-9_.]+)/g))
            expect(setNames).toContain(name);
        }
        // As existing rows, they need no change; another rule set changes firewall rows only.
        const existing: ExistingRow[] = rows.map((row, n) => ({ ...row, uuid: `u${n}` }));
        expect(diffRows(rows, existing)).toEqual([]);
        const changed = diffRows(vpcRows(vpc(other.rules, other.preset)), existing);
        for (const change of changed) expect(['ACL', 'Address_Set', 'Port_Group']).toContain(change.table);
      }),
      { numRuns: 100 },
    );
  });

  it('names its rows from Nimbus ids in what OVN takes as names, and refuses more rules than priorities', () => {
    const compiled = compileFirewall(
      'ins_Ab-9.x',
      aclInputsFor({ ...INSTANCE, firewall_preset: 'web' }, [], PRIVATE),
      NETWORK,
    );
    for (const name of [compiled.portGroup, ...compiled.addressSets.map((s) => s.name)]) {
      expect(name).toMatch(/^[A-Za-z_.][A-Za-z0-9_.]*$/);
    }
    const many = Array.from({ length: MAX_RULES_PER_DIRECTION + 1 }, (_, n) => ({
      source: 'rule' as const,
      id: `fwr_${n}`,
      name: 'r',
      direction: 'inbound' as const,
      action: 'allow' as const,
      protocol: 'tcp' as const,
      ports: '22',
      sources: ['0.0.0.0/0'],
      destinations: [],
      priority: 1,
    }));
    expect(() => compileFirewall(instancePort, many, NETWORK)).toThrow(/do not fit/);
  });

  it('keeps an ACL row for a rule while the rule lives: a new rule moves priorities, not keys', () => {
    const base = aclInputsFor({ ...INSTANCE, firewall_preset: 'ssh-only' }, [], PRIVATE);
    const before = compileFirewall(instancePort, base, NETWORK);
    const extra = {
      source: 'rule' as const,
      id: 'fwr_new',
      name: 'n',
      direction: 'inbound' as const,
      action: 'deny' as const,
      protocol: 'udp' as const,
      ports: '53',
      sources: ['198.51.100.0/24'],
      destinations: [],
      priority: 1,
    };
    const after = compileFirewall(instancePort, [extra, ...base], NETWORK);
    const keys = (c: CompiledFirewall) => c.acls.map((acl) => acl.key);
    expect(keys(after)).toEqual(expect.arrayContaining(keys(before)));
    expect(keys(after).length).toBe(keys(before).length + 1);
  });
});
