/** The webhook form's bodies: create, and the PATCH of only the changed fields. */
import { describe, expect, it } from 'vitest';
import type { Schemas } from '../api.ts';
import { createBody, NEW_WEBHOOK, patchBody, webhookDraftOf } from './webhook-draft.ts';

const hook = {
  url: 'https://example.com/hook',
  description: 'ops',
  events: ['instance.*', 'invoice.created'],
} as unknown as Schemas['Webhook'];

describe('webhook bodies', () => {
  it('creates with every event by default and leaves an empty description out', () => {
    expect(createBody({ ...NEW_WEBHOOK, url: 'https://example.com/a' })).toEqual({
      url: 'https://example.com/a',
      events: ['*'],
    });
  });

  it('shows a subscription as it is, and an untouched one sends nothing', () => {
    const draft = webhookDraftOf(hook);
    expect(draft).toEqual({
      url: 'https://example.com/hook',
      description: 'ops',
      everything: false,
      events: ['instance.*', 'invoice.created'],
    });
    expect(patchBody(draft, { ...draft, events: ['invoice.created', 'instance.*'] })).toEqual({});
  });

  it('sends only the changed fields; an emptied description is null', () => {
    const draft = webhookDraftOf(hook);
    expect(patchBody(draft, { ...draft, url: 'https://example.com/new' })).toEqual({
      url: 'https://example.com/new',
    });
    expect(patchBody(draft, { ...draft, description: '' })).toEqual({ description: null });
    expect(patchBody(draft, { ...draft, events: ['instance.*'] })).toEqual({ events: ['instance.*'] });
    expect(patchBody(draft, { ...draft, everything: true })).toEqual({ events: ['*'] });
  });
});
