/**
 * Firewall rule events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). Written here until firewall rules have a TypeBox record to pick them from.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';

const FirewallRuleEvent = Type.Object({
  firewall_rule_id: Type.String({ description: 'The firewall rule' }),
  name: Type.String(),
  region: Type.Optional(Type.String()),
  direction: Type.Optional(Type.String({ description: '`inbound` or `outbound`' })),
  action: Type.Optional(Type.String({ description: '`allow` or `deny`' })),
  protocol: Type.Optional(Type.String({ description: '`tcp`, `udp`, `icmp` or `all`' })),
  ports: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  priority: Type.Optional(Type.Integer()),
  enabled: Type.Optional(Type.Boolean()),
  changed: Type.Optional(
    Type.Array(Type.String(), { description: 'firewall_rule.updated: the fields the change named' }),
  ),
});

export const FIREWALL_RULE_EVENTS = {
  'firewall_rule.created': entry('A firewall rule was created', FirewallRuleEvent),
  'firewall_rule.updated': entry('A firewall rule changed', FirewallRuleEvent),
  'firewall_rule.deleted': entry('A firewall rule is gone', FirewallRuleEvent),
};

type FirewallRuleEvents = typeof FIREWALL_RULE_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends FirewallRuleEvents {}
}
