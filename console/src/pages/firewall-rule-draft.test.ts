import { describe, expect, it } from 'vitest';
import type { Schemas } from '../api.ts';
import { createBody, draftOf, NEW_RULE, patchBody } from './firewall-rule-draft.ts';

const RULE: Schemas['FirewallRule'] = {
  id: 'fwr_1',
  name: 'allow-web',
  description: '',
  direction: 'inbound',
  action: 'allow',
  protocol: 'tcp',
  ports: '80',
  sources: ['203.0.113.0/24'],
  destinations: [],
  priority: 500,
  targets: { instance_ids: ['ins_pinned'], tags: { role: 'web', canary: '' } },
  region: 'us-east-1',
  enabled: true,
  created_at: '2026-11-27T00:00:00Z',
  updated_at: '2026-11-27T00:00:00Z',
};

describe('firewall rule drafts', () => {
  it('shows a rule as the form edits it: tags as a line, anywhere as an empty address field', () => {
    expect(draftOf(RULE)).toMatchObject({
      addresses: '203.0.113.0/24',
      tags: 'role=web, canary',
      ports: '80',
    });
    const open = { ...RULE, sources: ['::/0', '0.0.0.0/0'], ports: null, protocol: 'all' as const };
    expect(draftOf(open)).toMatchObject({ addresses: '', ports: '' });
  });

  it('sends nothing for an untouched rule', () => {
    const draft = draftOf(RULE);
    expect(patchBody(RULE, draft, { ...draft })).toEqual({});
  });

  it('sends only the changed fields; new tags replace the targets and keep the pinned instances', () => {
    const before = draftOf(RULE);
    expect(patchBody(RULE, before, { ...before, ports: '8080', tags: 'role=api', enabled: false })).toEqual({
      ports: '8080',
      targets: { instance_ids: ['ins_pinned'], tags: { role: 'api' } },
      enabled: false,
    });
    expect(patchBody(RULE, before, { ...before, tags: '' })).toEqual({
      targets: { instance_ids: ['ins_pinned'], tags: {} },
    });
  });

  it('an emptied address field is anywhere again; a new direction takes the field as the other list', () => {
    const before = draftOf(RULE);
    expect(patchBody(RULE, before, { ...before, addresses: '' })).toEqual({
      sources: ['0.0.0.0/0', '::/0'],
    });
    expect(patchBody(RULE, before, { ...before, direction: 'outbound' })).toEqual({
      direction: 'outbound',
      destinations: ['203.0.113.0/24'],
    });
  });

  it('leaves ports to the API going to icmp, and names them coming back to tcp', () => {
    const before = draftOf(RULE);
    expect(patchBody(RULE, before, { ...before, protocol: 'icmp' })).toEqual({ protocol: 'icmp' });
    const icmp = { ...RULE, protocol: 'icmp' as const, ports: null };
    const icmpDraft = draftOf(icmp);
    expect(patchBody(icmp, icmpDraft, { ...icmpDraft, protocol: 'udp', ports: '53' })).toEqual({
      protocol: 'udp',
      ports: '53',
    });
  });

  it('creates with the API defaults left out: no addresses is anywhere, no tags is every instance', () => {
    expect(createBody({ ...NEW_RULE, name: 'ssh', ports: ' 22 ' })).toEqual({
      name: 'ssh',
      direction: 'inbound',
      action: 'allow',
      protocol: 'tcp',
      region: 'us-east-1',
      priority: 1000,
      ports: '22',
    });
    expect(
      createBody({
        ...NEW_RULE,
        name: 'out',
        direction: 'outbound',
        protocol: 'all',
        addresses: '10.0.0.0/8 192.168.0.0/16',
        tags: 'env=prod',
      }),
    ).toMatchObject({ destinations: ['10.0.0.0/8', '192.168.0.0/16'], targets: { tags: { env: 'prod' } } });
  });

  it('sends a new description alone, an emptied one as an empty string, and none on create when empty', () => {
    const before = draftOf(RULE);
    expect(patchBody(RULE, before, { ...before, description: 'public web' })).toEqual({
      description: 'public web',
    });
    const described = draftOf({ ...RULE, description: 'public web' });
    expect(patchBody(RULE, described, { ...described, description: '' })).toEqual({ description: '' });
    expect(createBody({ ...NEW_RULE, name: 'r', ports: '22' })).not.toHaveProperty('description');
    expect(createBody({ ...NEW_RULE, name: 'r', ports: '22', description: 'ssh' }).description).toBe('ssh');
  });
});
