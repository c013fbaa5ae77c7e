/**
 * The firewall evaluator as properties: first match in effective order decides; user rules by priority
 * before presets before defaults; ports and CIDRs (IPv4 and IPv6) match exactly what they cover.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatCidr, formatIp, type IpAddress, parseIp } from '../../platform/domain/cidrs.js';
import { FIREWALL_PRESETS } from '../instances/rules.js';
import {
  ACTIONS,
  DIRECTIONS,
  decide,
  type EffectiveRule,
  effectiveRules,
  evaluate,
  type FirewallRule,
  formatPorts,
  matches,
  PACKET_PROTOCOLS,
  type Packet,
  PROTOCOLS,
  parsePorts,
  portsProblem,
  presetRules,
  selects,
} from './firewall-rules.js';

const PRIVATE = '10.10.0.0/16';
const v4 = fc.integer({ min: 0, max: 2 ** 32 - 1 }).map((n): IpAddress => ({ family: 4, value: BigInt(n) }));
const v6 = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }).map((value): IpAddress => ({ family: 6, value }));
const anyAddress = fc.oneof(v4, v6);
const anyPort = fc.integer({ min: 1, max: 65_535 });
const portRange = fc
  .tuple(anyPort, anyPort)
  .map(([a, b]) => formatPorts({ from: Math.min(a, b), to: Math.max(a, b) }));

const packet: fc.Arbitrary<Packet> = fc
  .record({
    direction: fc.constantFrom(...DIRECTIONS),
    protocol: fc.constantFrom(...PACKET_PROTOCOLS),
    port: anyPort,
    address: anyAddress,
  })
  .map((p) => ({ ...p, port: p.protocol === 'icmp' ? null : p.port }));

/** A block around (or away from) an address: its first `prefix` bits. */
function blockAround(address: IpAddress, prefix: number): string {
  const bits = address.family === 4 ? 32 : 128;
  const p = Math.min(prefix, bits);
  const host = (1n << BigInt(bits - p)) - 1n;
  return formatCidr({ family: address.family, prefix: p, network: address.value & ~host });
}

let counter = 0;
const userRule: fc.Arbitrary<FirewallRule> = fc
  .record({
    direction: fc.constantFrom(...DIRECTIONS),
    action: fc.constantFrom(...ACTIONS),
    protocol: fc.constantFrom(...PROTOCOLS),
    ports: portRange,
    remote: fc.array(fc.tuple(anyAddress, fc.integer({ min: 0, max: 128 })), { minLength: 1, maxLength: 3 }),
    priority: fc.integer({ min: 1, max: 20 }),
    enabled: fc.boolean(),
    second: fc.integer({ min: 0, max: 59 }),
  })
  .map((r) => {
    counter += 1;
    const remote = r.remote.map(([a, prefix]) => blockAround(a, prefix));
    return {
      id: `fwr_${String(counter).padStart(26, '0')}`,
      account_id: 'acct_x',
      name: `r${counter}`,
      description: '',
      direction: r.direction,
      action: r.action,
      protocol: r.protocol,
      ports: r.protocol === 'tcp' || r.protocol === 'udp' ? r.ports : null,
      sources: r.direction === 'inbound' ? remote : [],
      destinations: r.direction === 'outbound' ? remote : [],
      priority: r.priority,
      targets: { instance_ids: [], tags: {} },
      region: 'us-east-1',
      enabled: r.enabled,
      created_at: `2026-01-01T00:00:${String(r.second).padStart(2, '0')}.000Z`,
      updated_at: '2026-01-01T00:00:00.000Z',
    };
  });

const preset = fc.constantFrom(...FIREWALL_PRESETS);

/** The oracle: the lowest (priority, created_at, id) enabled user rule that covers the packet, by brute force. */
function bestUserRule(rules: FirewallRule[], p: Packet): FirewallRule | undefined {
  let best: FirewallRule | undefined;
  for (const rule of rules) {
    if (!rule.enabled) continue;
    const effective = effectiveRules({
      rules: [rule],
      preset: 'none',
      privateNetwork: PRIVATE,
    })[0] as EffectiveRule;
    if (!matches(effective, p)) continue;
    const key = (r: FirewallRule) => [r.priority, r.created_at, r.id] as const;
    if (!best) best = rule;
    else {
      const [a, b] = [key(rule), key(best)];
      if (a[0] < b[0] || (a[0] === b[0] && (a[1] < b[1] || (a[1] === b[1] && a[2] < b[2])))) best = rule;
    }
  }
  return best;
}

describe('the firewall evaluator', () => {
  it('the covering enabled user rule with the lowest priority decides, whatever the preset', () => {
    fc.assert(
      fc.property(fc.array(userRule, { maxLength: 8 }), preset, packet, (rules, pre, p) => {
        const verdict = decide({ rules, preset: pre, privateNetwork: PRIVATE }, p);
        const best = bestUserRule(rules, p);
        if (best) {
          expect(verdict.matched_rule.source).toBe('rule');
          expect(verdict.matched_rule.id).toBe(best.id);
          expect(verdict.verdict).toBe(best.action);
        } else {
          expect(verdict.matched_rule.source).not.toBe('rule');
        }
      }),
    );
  });

  it('without a covering user rule: a covering preset rule allows, then the private network, then the default policy', () => {
    fc.assert(
      fc.property(preset, packet, (pre, p) => {
        const verdict = decide({ rules: [], preset: pre, privateNetwork: PRIVATE }, p);
        const fromPreset = presetRules(pre).some((rule) => matches(rule, p));
        const privateBlock = parseIp('10.10.0.0') as IpAddress;
        const fromPrivate =
          p.address.family === 4 &&
          p.address.value >> 16n === privateBlock.value >> 16n &&
          p.direction === 'inbound';
        if (p.direction === 'outbound') {
          expect(verdict).toMatchObject({ verdict: 'allow', matched_rule: { source: 'default' } });
        } else if (fromPreset) {
          expect(verdict).toMatchObject({ verdict: 'allow', matched_rule: { source: 'preset' } });
        } else if (fromPrivate) {
          expect(verdict).toMatchObject({ verdict: 'allow', matched_rule: { source: 'default' } });
        } else {
          expect(verdict).toMatchObject({ verdict: 'deny', matched_rule: { source: 'default' } });
        }
      }),
    );
  });

  it('the verdict is always the matched rule’s action, and the matched rule covers the packet', () => {
    fc.assert(
      fc.property(fc.array(userRule, { maxLength: 8 }), preset, packet, (rules, pre, p) => {
        const ordered = effectiveRules({ rules, preset: pre, privateNetwork: PRIVATE });
        const verdict = evaluate(ordered, p);
        expect(verdict.verdict).toBe(verdict.matched_rule.action);
        expect(matches(verdict.matched_rule, p)).toBe(true);
        // Nothing before it covers the packet.
        const index = ordered.indexOf(verdict.matched_rule);
        expect(ordered.slice(0, index).some((rule) => matches(rule, p))).toBe(false);
      }),
    );
  });

  it('effective order: user rules sorted by priority, then presets, then defaults; disabled rules left out', () => {
    fc.assert(
      fc.property(fc.array(userRule, { maxLength: 10 }), preset, (rules, pre) => {
        const ordered = effectiveRules({ rules, preset: pre, privateNetwork: PRIVATE });
        const sources = ordered.map((rule) => rule.source);
        expect([...sources].sort((a, b) => rank(a) - rank(b))).toEqual(sources);
        const user = ordered.filter((rule) => rule.source === 'rule');
        expect(user).toHaveLength(rules.filter((rule) => rule.enabled).length);
        for (let i = 1; i < user.length; i++) {
          expect((user[i - 1]?.priority ?? 0) <= (user[i]?.priority ?? 0)).toBe(true);
        }
      }),
    );
  });

  it('a port range covers exactly the ports from its start to its end', () => {
    fc.assert(
      fc.property(portRange, anyPort, v4, (ports, port, address) => {
        const rule = effectiveRules({
          rules: [{ ...baseRule, protocol: 'tcp', ports, sources: ['0.0.0.0/0'] }],
          preset: 'none',
          privateNetwork: PRIVATE,
        })[0] as EffectiveRule;
        const { from, to } = parsePorts(ports);
        const p: Packet = { direction: 'inbound', protocol: 'tcp', port, address };
        expect(matches(rule, p)).toBe(port >= from && port <= to);
        // udp and icmp packets never match a tcp rule.
        expect(matches(rule, { ...p, protocol: 'udp' })).toBe(false);
        expect(matches(rule, { ...p, protocol: 'icmp', port: null })).toBe(false);
      }),
    );
  });

  it('an address list covers a packet exactly when one of its blocks contains the address (IPv4 and IPv6)', () => {
    fc.assert(
      fc.property(anyAddress, fc.integer({ min: 0, max: 128 }), anyAddress, (around, prefix, address) => {
        const cidr = blockAround(around, prefix);
        const rule = effectiveRules({
          rules: [{ ...baseRule, protocol: 'all', ports: null, sources: [cidr] }],
          preset: 'none',
          privateNetwork: PRIVATE,
        })[0] as EffectiveRule;
        const bits = around.family === 4 ? 32 : 128;
        const p = Math.min(prefix, bits);
        const inside =
          address.family === around.family &&
          address.value >> BigInt(bits - p) === around.value >> BigInt(bits - p);
        expect(matches(rule, { direction: 'inbound', protocol: 'udp', port: 53, address })).toBe(inside);
      }),
    );
  });

  it('an IPv4-mapped IPv6 address is judged as its IPv4 address', () => {
    const rule = {
      ...baseRule,
      protocol: 'all' as const,
      ports: null,
      action: 'deny' as const,
      sources: ['198.51.100.0/24'],
    };
    const mapped = parseIp('::ffff:198.51.100.7') as IpAddress;
    const verdict = decide(
      { rules: [rule], preset: 'allow-all', privateNetwork: PRIVATE },
      { direction: 'inbound', protocol: 'tcp', port: 22, address: mapped },
    );
    expect(verdict).toMatchObject({ verdict: 'deny', matched_rule: { id: rule.id } });
  });

  it('ports: one port or an ascending range within 1–65535', () => {
    expect(portsProblem('22')).toBeNull();
    expect(portsProblem('8000-8100')).toBeNull();
    expect(portsProblem('80-80')).toBeNull();
    for (const bad of ['0', '65536', '100-99', '22,80', '-1', '1-', 'x', '1-2-3', '99999']) {
      expect(portsProblem(bad), bad).not.toBeNull();
    }
    fc.assert(
      fc.property(portRange, (ports) => {
        expect(formatPorts(parsePorts(ports))).toBe(ports);
      }),
    );
  });

  it('targets: empty selects the whole region; otherwise an id, or every tag', () => {
    const instance = { id: 'ins_a', region: 'us-east-1', tags: { role: 'db', env: 'prod' } };
    const targets = (instance_ids: string[], tags: Record<string, string>) => ({
      region: 'us-east-1',
      targets: { instance_ids, tags },
    });
    expect(selects(targets([], {}), instance)).toBe(true);
    expect(selects({ ...targets([], {}), region: 'us-west-2' }, instance)).toBe(false);
    expect(selects(targets(['ins_a'], {}), instance)).toBe(true);
    expect(selects(targets(['ins_b'], {}), instance)).toBe(false);
    expect(selects(targets([], { role: 'db' }), instance)).toBe(true);
    expect(selects(targets([], { role: 'db', env: 'dev' }), instance)).toBe(false);
    expect(selects(targets(['ins_b'], { env: 'prod' }), instance)).toBe(true);
  });

  it('formats addresses in answers canonically', () => {
    expect(formatIp(parseIp('2001:DB8:0:0:0:0:0:7') as IpAddress)).toBe('2001:db8::7');
  });
});

const rank = (source: string) => ({ rule: 0, preset: 1, default: 2 })[source] ?? 3;

const baseRule: FirewallRule = {
  id: 'fwr_base',
  account_id: 'acct_x',
  name: 'base',
  description: '',
  direction: 'inbound',
  action: 'allow',
  protocol: 'tcp',
  ports: '22',
  sources: ['0.0.0.0/0'],
  destinations: [],
  priority: 100,
  targets: { instance_ids: [], tags: {} },
  region: 'us-east-1',
  enabled: true,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
};
