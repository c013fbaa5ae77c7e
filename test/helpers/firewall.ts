/**
 * A stored firewall rule for tests that judge packets without the API: the fields a rule decides with,
 * the rest filled as the service would (its address list on the side its direction reads, ports only
 * for tcp and udp, a fresh id, creation times one second apart unless given).
 */
import type { FirewallRule } from '../../src/resources/networking/firewall-rules.js';

export interface RuleFields {
  direction: FirewallRule['direction'];
  action: FirewallRule['action'];
  protocol: FirewallRule['protocol'];
  ports: string | null;
  /** The blocks of the side the direction reads: sources inbound, destinations outbound. */
  remote: readonly string[];
  priority?: number;
  enabled?: boolean;
  targets?: FirewallRule['targets'];
  accountId?: string;
  region?: string;
  /** Seconds after 2026-11-01T00:00:00Z; by default each rule a second after the one before. */
  createdSecond?: number;
}

let made = 0;

export function firewallRule(fields: RuleFields): FirewallRule {
  made += 1;
  const remote = [...fields.remote];
  const second = fields.createdSecond ?? made % 60;
  return {
    id: `fwr_${String(made).padStart(26, '0')}`,
    account_id: fields.accountId ?? 'acct_x',
    name: `rule ${made}`,
    description: '',
    direction: fields.direction,
    action: fields.action,
    protocol: fields.protocol,
    ports: fields.protocol === 'tcp' || fields.protocol === 'udp' ? fields.ports : null,
    sources: fields.direction === 'inbound' ? remote : [],
    destinations: fields.direction === 'outbound' ? remote : [],
    priority: fields.priority ?? 1000,
    targets: fields.targets ?? { instance_ids: [], tags: {} },
    region: fields.region ?? 'us-east-1',
    enabled: fields.enabled ?? true,
    created_at: `2026-11-01T00:00:${String(second).padStart(2, '0')}.000Z`,
    updated_at: '2026-11-01T00:00:00.000Z',
  };
}

/** Deny rules of priority 1 for everything, both ways: what no preset or default can open again. */
export function denyEverything(accountId: string): FirewallRule[] {
  return (['inbound', 'outbound'] as const).map((direction) =>
    firewallRule({
      direction,
      action: 'deny',
      protocol: 'all',
      ports: null,
      remote: ['0.0.0.0/0', '::/0'],
      priority: 1,
      accountId,
    }),
  );
}
