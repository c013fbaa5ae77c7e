/**
 * The firewall rule record: the one declaration of its fields, as the services see them (the store's
 * row decoded: firewall-store.ts). The API view (firewall-routes.ts: this less `account_id`) and the
 * data of its events (events.ts, picked) are derived from it, with its descriptions.
 */
import { type Static, Type } from '@sinclair/typebox';
import { Targets } from '../../platform/domain/targets.js';
import { StringEnum, Timestamp } from '../../platform/http/schemas.js';
import { ACTIONS, DIRECTIONS, PROTOCOLS } from './firewall-rules.js';

export const FirewallRuleRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  direction: StringEnum(DIRECTIONS),
  action: StringEnum(ACTIONS),
  protocol: StringEnum(PROTOCOLS),
  // `"22"` or `"8000-8100"` for tcp and udp.
  ports: Type.Union([Type.String(), Type.Null()], { description: 'null for icmp and all' }),
  sources: Type.Array(Type.String(), { description: 'Inbound rules: remote CIDR blocks; [] on outbound' }),
  destinations: Type.Array(Type.String(), {
    description: 'Outbound rules: remote CIDR blocks; [] on inbound',
  }),
  priority: Type.Integer(),
  targets: Targets,
  region: Type.String(),
  enabled: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});

/** A stored rule, decoded. */
export type FirewallRule = Static<typeof FirewallRuleRecord>;
