/**
 * The webhook form's logic apart from its markup: a subscription as the form shows it (every event, or a
 * set of event families and types), the create body, and the PATCH body of only the fields the user
 * changed (an emptied description is null, which clears it).
 */
import type { paths } from '../../../sdk/src/generated/v1.ts';
import type { Schemas } from '../api.ts';

export type WebhookBody = paths['/v1/webhooks']['post']['requestBody']['content']['application/json'];
export type WebhookPatch = paths['/v1/webhooks/{id}']['patch']['requestBody']['content']['application/json'];

export interface WebhookDraft {
  url: string;
  description: string;
  /** `*`: every event; the list below is then kept but not sent. */
  everything: boolean;
  events: string[];
}

export const NEW_WEBHOOK: WebhookDraft = { url: '', description: '', everything: true, events: [] };

export function webhookDraftOf(hook: Schemas['Webhook']): WebhookDraft {
  const everything = hook.events.includes('*');
  return {
    url: hook.url,
    description: hook.description ?? '',
    everything,
    events: everything ? [] : [...hook.events],
  };
}

/** What the subscription receives, as the API takes it. */
export function eventsOf(draft: WebhookDraft): string[] {
  return draft.everything ? ['*'] : draft.events;
}

export function createBody(draft: WebhookDraft): WebhookBody {
  return {
    url: draft.url,
    events: eventsOf(draft),
    ...(draft.description ? { description: draft.description } : {}),
  };
}

export function patchBody(before: WebhookDraft, after: WebhookDraft): WebhookPatch {
  const body: WebhookPatch = {};
  if (after.url !== before.url) body.url = after.url;
  if (after.description !== before.description) body.description = after.description || null;
  // Compared as sets: ticking a family off and on again changes nothing.
  const events = eventsOf(after);
  if ([...events].sort().join() !== [...eventsOf(before)].sort().join()) body.events = events;
  return body;
}
