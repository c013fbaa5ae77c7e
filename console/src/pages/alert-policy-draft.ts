/**
 * The alert policy form's logic apart from its markup: a policy as the form shows it (tags and e-mail
 * addresses as text, the condition as a kind and its fields), the create body, and the PATCH body of only
 * the parts the user changed. The API wants a whole policy after a PATCH, so a changed condition, target
 * set or channel set is sent whole (a switch from a metric to a state nulls the metric's fields).
 */
import type { paths } from '../../../sdk/src/generated/v1.ts';
import type { Schemas } from '../api.ts';
import { formatTags, parseTags } from '../tags.ts';

export type PolicyBody = paths['/v1/alerts']['post']['requestBody']['content']['application/json'];
export type PolicyPatch = paths['/v1/alerts/{id}']['patch']['requestBody']['content']['application/json'];
export type Metric = NonNullable<PolicyBody['metric']>;
export type Window = NonNullable<PolicyBody['window']>;
type Chat = NonNullable<PolicyBody['channels']['chat']>[number];
export type ChatFormat = Chat['format'];
export type Kind = 'metric' | 'error' | 'stuck';

export interface PolicyDraft {
  name: string;
  description: string;
  kind: Kind;
  metric: Metric;
  compare: 'above' | 'below';
  threshold: string;
  window: Window;
  tags: string;
  instanceIds: string[];
  emails: string;
  webhookIds: string[];
  chatUrl: string;
  chatFormat: ChatFormat;
  /** Chat channels after the first: the form edits one, and keeps the others as they are. */
  moreChats: Chat[];
}

export const NEW_POLICY: PolicyDraft = {
  name: '',
  description: '',
  kind: 'metric',
  metric: 'cpu_percent',
  compare: 'above',
  threshold: '80',
  window: '5m',
  tags: '',
  instanceIds: [],
  emails: '',
  webhookIds: [],
  chatUrl: '',
  chatFormat: 'slack',
  moreChats: [],
};

const list = (text: string) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

export function policyDraftOf(policy: Schemas['AlertPolicy']): PolicyDraft {
  const [chat, ...moreChats] = policy.channels.chat;
  return {
    name: policy.name,
    description: policy.description ?? '',
    kind: policy.state ?? 'metric',
    metric: policy.metric ?? NEW_POLICY.metric,
    compare: policy.compare ?? NEW_POLICY.compare,
    threshold: policy.threshold === null ? NEW_POLICY.threshold : String(policy.threshold),
    window: policy.window ?? NEW_POLICY.window,
    tags: formatTags(policy.targets.tags),
    instanceIds: [...policy.targets.instance_ids],
    emails: policy.channels.email.join(', '),
    webhookIds: [...policy.channels.webhook_ids],
    chatUrl: chat?.url ?? '',
    chatFormat: chat?.format ?? NEW_POLICY.chatFormat,
    moreChats,
  };
}

/** The condition fields as the API takes them; for an edit, those a kind does not use are null. */
function condition(draft: PolicyDraft) {
  if (draft.kind === 'metric')
    return {
      metric: draft.metric,
      compare: draft.compare,
      threshold: Number(draft.threshold),
      window: draft.window,
    };
  if (draft.kind === 'stuck') return { state: 'stuck' as const, window: draft.window };
  return { state: 'error' as const };
}

function chats(draft: PolicyDraft): Chat[] {
  return [...(draft.chatUrl ? [{ url: draft.chatUrl, format: draft.chatFormat }] : []), ...draft.moreChats];
}

export function createBody(draft: PolicyDraft): PolicyBody {
  const tags = parseTags(draft.tags);
  const hasTags = Object.keys(tags).length > 0;
  const emails = list(draft.emails);
  const chat = chats(draft);
  return {
    name: draft.name,
    ...(draft.description ? { description: draft.description } : {}),
    ...condition(draft),
    ...(hasTags || draft.instanceIds.length > 0
      ? {
          targets: {
            ...(hasTags ? { tags } : {}),
            ...(draft.instanceIds.length > 0 ? { instance_ids: draft.instanceIds } : {}),
          },
        }
      : {}),
    channels: {
      ...(emails.length > 0 ? { email: emails } : {}),
      ...(draft.webhookIds.length > 0 ? { webhook_ids: draft.webhookIds } : {}),
      ...(chat.length > 0 ? { chat } : {}),
    },
  };
}

const sameSet = (a: readonly string[], b: readonly string[]) => [...a].sort().join() === [...b].sort().join();

export function patchBody(before: PolicyDraft, after: PolicyDraft): PolicyPatch {
  const body: PolicyPatch = {};
  if (after.name !== before.name) body.name = after.name;
  if (after.description !== before.description) body.description = after.description || null;
  const conditionChanged =
    after.kind !== before.kind ||
    (after.kind === 'metric' &&
      (after.metric !== before.metric ||
        after.compare !== before.compare ||
        Number(after.threshold) !== Number(before.threshold))) ||
    (after.kind !== 'error' && after.window !== before.window);
  if (conditionChanged)
    Object.assign(body, {
      metric: null,
      compare: null,
      threshold: null,
      window: null,
      state: null,
      ...condition(after),
    });
  if (after.tags !== before.tags || !sameSet(after.instanceIds, before.instanceIds))
    body.targets = { tags: parseTags(after.tags), instance_ids: after.instanceIds };
  if (
    !sameSet(list(after.emails), list(before.emails)) ||
    !sameSet(after.webhookIds, before.webhookIds) ||
    after.chatUrl !== before.chatUrl ||
    (after.chatUrl && after.chatFormat !== before.chatFormat)
  )
    body.channels = { email: list(after.emails), webhook_ids: after.webhookIds, chat: chats(after) };
  return body;
}
