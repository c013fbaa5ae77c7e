import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { TAG_VALUE_MAX_LENGTH } from '../../platform/domain/labels.js';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { withExample } from '../../platform/http/responses.js';
import { ListQuery, ResourceName, StringEnum } from '../../platform/http/schemas.js';
import { REGION_NAMES } from '../catalog/catalog.js';
import { FirewallRuleRecord } from './firewall-record.js';
import {
  ACTIONS,
  DIRECTIONS,
  FIREWALL_RULE_SORTS,
  MAX_ADDRESSES,
  MAX_DESCRIPTION_LENGTH,
  MAX_TARGET_INSTANCES,
  MAX_TARGET_TAGS,
  PRIORITY,
  PROTOCOLS,
} from './firewall-rules.js';
import { DEFAULT_PRIORITY, type FirewallRuleService } from './firewall-service.js';

const Description = Type.String({
  maxLength: MAX_DESCRIPTION_LENGTH,
  description: `Up to ${MAX_DESCRIPTION_LENGTH} printable characters`,
});
const Ports = Type.String({
  minLength: 1,
  maxLength: 11,
  description: 'One port ("22") or an inclusive range ("8000-8100"), 1–65535; tcp and udp only',
});
const Addresses = (what: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
    minItems: 1,
    maxItems: MAX_ADDRESSES,
    description: `${what}: IPv4 or IPv6 CIDR blocks (a bare address is one host); host bits must be zero`,
  });
const priority = {
  minimum: PRIORITY.min,
  maximum: PRIORITY.max,
  description: `${PRIORITY.min}–${PRIORITY.max}; lower is evaluated first`,
};
const Priority = Type.Integer(priority);
const Targets = Type.Object(
  {
    instance_ids: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: MAX_TARGET_INSTANCES }),
    ),
    tags: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: TAG_VALUE_MAX_LENGTH }), {
        maxProperties: MAX_TARGET_TAGS,
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'Instances the rule applies to: those named in instance_ids, and those carrying every tag in tags; ' +
      'empty means every instance of the account in the region',
  },
);

/** What the API shows of a rule: its record, less the account it belongs to. */
const FirewallRule = Type.Object(Type.Omit(FirewallRuleRecord, ['account_id']).properties, {
  $id: 'FirewallRule',
  title: 'FirewallRule',
});

const NewFirewallRule = Type.Object(
  {
    name: ResourceName,
    description: Type.Optional(Description),
    direction: StringEnum(DIRECTIONS),
    action: StringEnum(ACTIONS),
    protocol: StringEnum(PROTOCOLS),
    ports: Type.Optional(Type.Union([Ports, Type.Null()])),
    sources: Type.Optional(Addresses('Inbound rules: where packets come from (default anywhere)')),
    destinations: Type.Optional(Addresses('Outbound rules: where packets go (default anywhere)')),
    priority: Type.Optional(Type.Integer({ ...priority, default: DEFAULT_PRIORITY })),
    targets: Type.Optional(Targets),
    region: StringEnum(REGION_NAMES),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { title: 'NewFirewallRule', additionalProperties: false },
);

const FirewallRuleUpdate = Type.Object(
  {
    name: Type.Optional(ResourceName),
    description: Type.Optional(Description),
    direction: Type.Optional(StringEnum(DIRECTIONS)),
    action: Type.Optional(StringEnum(ACTIONS)),
    protocol: Type.Optional(StringEnum(PROTOCOLS)),
    ports: Type.Optional(Type.Union([Ports, Type.Null()])),
    sources: Type.Optional(Addresses('Inbound rules: where packets come from')),
    destinations: Type.Optional(Addresses('Outbound rules: where packets go')),
    priority: Type.Optional(Priority),
    targets: Type.Optional(Targets),
    enabled: Type.Optional(Type.Boolean()),
  },
  { title: 'FirewallRuleUpdate', additionalProperties: false, minProperties: 1 },
);

const ListFirewallRulesQuery = ListQuery(
  FIREWALL_RULE_SORTS,
  { sort: 'created_at' },
  {
    direction: Type.Optional(StringEnum(DIRECTIONS)),
    protocol: Type.Optional(StringEnum(PROTOCOLS)),
    region: Type.Optional(StringEnum(REGION_NAMES)),
    enabled: Type.Optional(Type.Boolean()),
    instance_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description:
          'Rules whose targets select this instance now (by id, by its current tags, or all of its region)',
      }),
    ),
  },
);

export const firewallRuleRoutes: FastifyPluginAsyncTypebox<{ firewallRules: FirewallRuleService }> = async (
  app,
  { firewallRules },
) => {
  const route = resourceRoutes(app, {
    path: '/firewall/rules',
    tag: 'networking',
    permission: 'networking',
    view: FirewallRule,
  });

  route.create({
    summary: 'Create firewall rule',
    description:
      'A rule allows or denies inbound or outbound traffic by protocol, port range and remote CIDR blocks, for ' +
      'the instances its targets select in one region. Lower priorities are evaluated first; the first match ' +
      'decides. Counts against the `firewall_rules` quota (403 `quota_exceeded`). A target instance of ' +
      'another account is 404.',
    body: withExample(NewFirewallRule, {
      name: 'postgres-from-office',
      direction: 'inbound',
      action: 'allow',
      protocol: 'tcp',
      ports: '5432',
      sources: ['198.51.100.0/24', '2001:db8::/32'],
      priority: 100,
      targets: { tags: { role: 'db' } },
      region: 'us-east-1',
    }),
    status: 201,
    answer: 'The rule as stored (addresses in canonical form)',
    errors: [404],
    viewOfMade: (accountId, made) => firewallRules.get(accountId, made.id),
    run: ({ accountId, body }) => firewallRules.create(accountId, body),
  });

  route.list({
    summary: 'List firewall rules',
    description:
      "The account's firewall rules, newest first. `instance_id` keeps the rules that select that instance " +
      '(404 when it is not yours).',
    query: ListFirewallRulesQuery,
    answer: 'One page of firewall rules',
    errors: [404],
    run: ({ accountId, query }) => firewallRules.list(accountId, query),
  });

  route.get({
    summary: 'Get firewall rule',
    description: 'One firewall rule of the account.',
    answer: 'The firewall rule',
    errors: [404],
    run: ({ accountId, params }) => firewallRules.get(accountId, params.id),
  });

  route.update({
    summary: 'Update firewall rule',
    description:
      'Changes the given fields; the region is fixed. A new direction moves the rule to the other address ' +
      'list (anywhere unless given); a change to icmp or all drops the ports. `targets` replaces the targets.',
    body: FirewallRuleUpdate,
    answer: 'The rule as changed',
    errors: [404],
    run: ({ accountId, params, body }) => firewallRules.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Delete firewall rule',
    description: 'Takes effect at once for every instance the rule selected.',
    answer: 'The rule as it was',
    errors: [404],
    run: ({ accountId, params }) => firewallRules.delete(accountId, params.id),
  });
};
