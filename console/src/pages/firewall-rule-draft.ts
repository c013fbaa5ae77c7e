/**
 * The firewall rule form's logic, apart from its markup: a rule as the form shows it (addresses and tags as
 * text, "anywhere" as an empty address field), the create body, and the PATCH body of only the fields the
 * user changed.
 */
import type { paths } from '../../../sdk/src/generated/v1.ts';
import type { Schemas } from '../api.ts';
import { formatTags, parseTags } from '../tags.ts';

type Rule = Schemas['FirewallRule'];
export type RuleBody = paths['/v1/firewall/rules']['post']['requestBody']['content']['application/json'];
export type RulePatch =
  paths['/v1/firewall/rules/{id}']['patch']['requestBody']['content']['application/json'];

/** Blank-separated or comma-separated CIDR blocks; empty means anywhere (the API's default). */
function blocks(text: string): string[] | undefined {
  const list = text
    .split(/[\s,]+/)
    .map((block) => block.trim())
    .filter(Boolean);
  return list.length ? list : undefined;
}

/** The form's tag line as a tag map; none at all is undefined (the rule then targets no tags). */
function tagMap(text: string): Record<string, string> | undefined {
  const tags = parseTags(text);
  return Object.keys(tags).length ? tags : undefined;
}

/** What the rule form edits, as the user typed it (addresses and tags as text). */
export interface RuleDraft {
  name: string;
  description: string;
  direction: RuleBody['direction'];
  action: RuleBody['action'];
  protocol: RuleBody['protocol'];
  ports: string;
  addresses: string;
  priority: string;
  region: RuleBody['region'];
  tags: string;
  enabled: boolean;
}

export const NEW_RULE: RuleDraft = {
  name: '',
  description: '',
  direction: 'inbound',
  action: 'allow',
  protocol: 'tcp',
  ports: '',
  addresses: '',
  priority: '1000',
  region: 'us-east-1',
  tags: '',
  enabled: true,
};
/** The API's "anywhere": the form shows it as an empty address field, as create takes it. */
const ANYWHERE = ['0.0.0.0/0', '::/0'];

export function draftOf(rule: Rule): RuleDraft {
  const list = rule.direction === 'inbound' ? rule.sources : rule.destinations;
  const anywhere = list.length === ANYWHERE.length && ANYWHERE.every((block) => list.includes(block));
  return {
    name: rule.name,
    description: rule.description,
    direction: rule.direction,
    action: rule.action,
    protocol: rule.protocol,
    ports: rule.ports ?? '',
    addresses: anywhere ? '' : list.join(', '),
    priority: String(rule.priority),
    region: rule.region as RuleBody['region'],
    tags: formatTags(rule.targets.tags),
    enabled: rule.enabled,
  };
}

export const takesPorts = (protocol: RuleDraft['protocol']) => protocol === 'tcp' || protocol === 'udp';

export function createBody(draft: RuleDraft): RuleBody {
  const list = blocks(draft.addresses);
  const targetTags = tagMap(draft.tags);
  return {
    name: draft.name,
    ...(draft.description ? { description: draft.description } : {}),
    direction: draft.direction,
    action: draft.action,
    protocol: draft.protocol,
    region: draft.region,
    priority: Number(draft.priority),
    ...(takesPorts(draft.protocol) ? { ports: draft.ports.trim() } : {}),
    ...(targetTags ? { targets: { tags: targetTags } } : {}),
    ...(list ? (draft.direction === 'inbound' ? { sources: list } : { destinations: list }) : {}),
  };
}

/**
 * Only the fields the user changed, so the rule's `firewall_rule.updated` event names just those. The
 * API moves the rule to the other address list on a new direction (anywhere unless given) and drops the
 * ports on icmp or all; the instance ids a rule targets (set through the API) are kept.
 */
export function patchBody(rule: Rule, before: RuleDraft, after: RuleDraft): RulePatch {
  const body: RulePatch = {};
  if (after.name !== before.name) body.name = after.name;
  // An emptied description is sent as '' (the API's PATCH takes a string, not null).
  if (after.description !== before.description) body.description = after.description;
  if (after.action !== before.action) body.action = after.action;
  if (after.priority !== before.priority) body.priority = Number(after.priority);
  if (after.enabled !== before.enabled) body.enabled = after.enabled;
  if (after.direction !== before.direction) body.direction = after.direction;
  if (after.protocol !== before.protocol) body.protocol = after.protocol;
  if (takesPorts(after.protocol) && (after.ports !== before.ports || !takesPorts(before.protocol)))
    body.ports = after.ports.trim();
  if (after.addresses !== before.addresses || after.direction !== before.direction) {
    const list = blocks(after.addresses) ?? ANYWHERE;
    if (after.direction === 'inbound') body.sources = list;
    else body.destinations = list;
  }
  if (after.tags !== before.tags)
    body.targets = { instance_ids: rule.targets.instance_ids, tags: tagMap(after.tags) ?? {} };
  return body;
}
