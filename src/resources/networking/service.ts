/**
 * An instance's network as its owner sees it: addresses and names (InstanceService.network), the rules
 * that decide its traffic in evaluation order, and the answer for one packet — all from the one
 * evaluator in resources/networking/firewall-rules.ts, so the list and the check can never disagree.
 */
import { formatIp, parseIp, unmapped } from '../../platform/domain/cidrs.js';
import { InvalidRequest, NotFound } from '../../platform/errors.js';
import type { Store } from '../../platform/store/db.js';
import type { InstanceService, NetworkView } from '../instances/service.js';
import { findAccountInstance } from '../instances/store.js';
import {
  type Direction,
  decide,
  type EffectiveRule,
  effectiveRules,
  type FirewallPreset,
  type InstanceFirewall,
  type PacketProtocol,
  type Verdict,
} from './firewall-rules.js';
import type { FirewallRuleService } from './firewall-service.js';

export interface InstanceNetworkView extends NetworkView {
  /** Every rule that can decide the instance's traffic, in the order they are tried. */
  firewall_rules: EffectiveRule[];
}

export interface PacketQuery {
  direction?: Direction | undefined;
  protocol: PacketProtocol;
  port?: number | undefined;
  address: string;
}

export interface CheckView extends Verdict {
  instance_id: string;
  packet: { direction: Direction; protocol: PacketProtocol; port: number | null; address: string };
}

export class NetworkService {
  constructor(
    private readonly store: Store,
    private readonly instances: InstanceService,
    private readonly firewallRules: FirewallRuleService,
  ) {}

  async network(accountId: string, id: string): Promise<InstanceNetworkView> {
    const base = await this.instances.network(accountId, id);
    return { ...base, firewall_rules: effectiveRules(await this.firewallOf(accountId, base)) };
  }

  async check(accountId: string, id: string, query: PacketQuery): Promise<CheckView> {
    const parsed = parseIp(query.address);
    if (!parsed) {
      throw new InvalidRequest('address is one IPv4 or IPv6 address, without a prefix length', {
        field: 'address',
        value: query.address,
      });
    }
    const port = query.port ?? null;
    if (query.protocol === 'icmp' && port !== null) {
      throw new InvalidRequest('icmp packets have no port; leave port out', { field: 'port', value: port });
    }
    if (query.protocol !== 'icmp' && port === null) {
      throw new InvalidRequest(`port is required for ${query.protocol}`, { field: 'port', value: null });
    }
    const packet = {
      direction: query.direction ?? 'inbound',
      protocol: query.protocol,
      port,
      address: parsed,
    };
    const base = await this.instances.network(accountId, id);
    const verdict = decide(await this.firewallOf(accountId, base), packet);
    return { instance_id: id, packet: { ...packet, address: formatIp(unmapped(parsed)) }, ...verdict };
  }

  private async firewallOf(accountId: string, base: NetworkView): Promise<InstanceFirewall> {
    const db = this.store.db;
    const instance = await findAccountInstance(db, accountId, base.instance_id);
    if (!instance) throw new NotFound('instance', base.instance_id);
    return {
      rules: await this.firewallRules.selecting(db, instance),
      preset: instance.firewall_preset as FirewallPreset,
      privateNetwork: base.private_network.cidr,
    };
  }
}
