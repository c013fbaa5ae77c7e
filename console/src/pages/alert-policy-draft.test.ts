/** The alert policy form's bodies: create as before, and the PATCH of only the changed parts, each whole. */
import { describe, expect, it } from 'vitest';
import type { Schemas } from '../api.ts';
import { createBody, NEW_POLICY, patchBody, policyDraftOf } from './alert-policy-draft.ts';

const policy = {
  id: 'alr_1',
  name: 'cpu-high',
  description: null,
  metric: 'cpu_percent',
  compare: 'above',
  threshold: 90,
  window: '5m',
  state: null,
  enabled: true,
  targets: { instance_ids: ['ins_1'], tags: { env: 'prod' } },
  channels: {
    email: ['ops@example.com'],
    webhook_ids: [],
    chat: [
      { url: 'https://chat.example.com/a', format: 'slack' },
      { url: 'https://chat.example.com/b', format: 'generic' },
    ],
  },
} as unknown as Schemas['AlertPolicy'];

describe('alert policy bodies', () => {
  it('creates with only what was given', () => {
    expect(createBody({ ...NEW_POLICY, name: 'p', emails: 'a@example.com' })).toEqual({
      name: 'p',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 80,
      window: '5m',
      channels: { email: ['a@example.com'] },
    });
  });

  it('an untouched policy sends nothing, nor a threshold retyped as the same number', () => {
    const draft = policyDraftOf(policy);
    expect(patchBody(draft, { ...draft })).toEqual({});
    expect(patchBody(draft, { ...draft, threshold: '90.0' })).toEqual({});
  });

  it('a new threshold sends the whole metric condition', () => {
    const draft = policyDraftOf(policy);
    expect(patchBody(draft, { ...draft, threshold: '75' })).toEqual({
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 75,
      window: '5m',
      state: null,
    });
  });

  it('a switch to a state nulls the metric fields', () => {
    const draft = policyDraftOf(policy);
    expect(patchBody(draft, { ...draft, kind: 'error' })).toEqual({
      metric: null,
      compare: null,
      threshold: null,
      window: null,
      state: 'error',
    });
  });

  it('new targets or channels go whole, keeping the chat channels the form does not show', () => {
    const draft = policyDraftOf(policy);
    expect(patchBody(draft, { ...draft, tags: '' })).toEqual({
      targets: { tags: {}, instance_ids: ['ins_1'] },
    });
    expect(
      patchBody(draft, { ...draft, emails: 'ops@example.com, me@example.com', description: 'x' }),
    ).toEqual({
      description: 'x',
      channels: {
        email: ['ops@example.com', 'me@example.com'],
        webhook_ids: [],
        chat: [
          { url: 'https://chat.example.com/a', format: 'slack' },
          { url: 'https://chat.example.com/b', format: 'generic' },
        ],
      },
    });
    expect(patchBody(draft, { ...draft, chatUrl: '' }).channels?.chat).toEqual([
      { url: 'https://chat.example.com/b', format: 'generic' },
    ]);
  });
});
