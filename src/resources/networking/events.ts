/**
 * Firewall rule events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). What the record has is picked from it (firewall-record.ts); the rest is
 * what a change says.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { FirewallRuleRecord } from './firewall-record.js';

const FirewallRuleEvent = Type.Object({
  firewall_rule_id: Type.String({ description: 'The firewall rule' }),
  ...Type.Pick(FirewallRuleRecord, ['name']).properties,
  ...Type.Partial(
    Type.Pick(FirewallRuleRecord, [
      'region',
      'direction',
      'action',
      'protocol',
      'ports',
      'priority',
      'enabled',
    ]),
  ).properties,
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
