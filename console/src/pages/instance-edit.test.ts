import { describe, expect, it } from 'vitest';
import type { Instance } from '../api.ts';
import { formatTags, parseTags } from '../tags.ts';
import { draftOf, patchBody } from './instance-edit.tsx';

const INSTANCE = {
  name: 'web-1',
  tags: { env: 'prod', canary: '' },
  firewall_preset: 'ssh-only',
  monitoring: true,
  backup_schedule: { frequency: 'daily', retention: 7 },
  protection: { delete: false },
} as unknown as Instance;

describe('instance edit', () => {
  it('sends nothing when nothing changed', () => {
    const draft = draftOf(INSTANCE);
    expect(draft).toMatchObject({ tags: 'env=prod, canary', backup: { frequency: 'daily', retention: '7' } });
    expect(patchBody(draft, { ...draft })).toEqual({});
  });

  it('sends only the changed fields, tags whole', () => {
    const before = draftOf(INSTANCE);
    expect(
      patchBody(before, {
        ...before,
        name: 'web-2',
        tags: 'env=staging',
        monitoring: false,
        firewallPreset: 'web',
      }),
    ).toEqual({ name: 'web-2', tags: { env: 'staging' }, monitoring: false, firewall_preset: 'web' });
  });

  it('switching deletion protection sends the whole protection object', () => {
    const before = draftOf(INSTANCE);
    expect(before.protect).toBe(false);
    expect(patchBody(before, { ...before, protect: true })).toEqual({ protection: { delete: true } });
  });

  it('a new retention or frequency sends the schedule; no backups sends null', () => {
    const before = draftOf(INSTANCE);
    expect(patchBody(before, { ...before, backup: { frequency: 'daily', retention: '3' } })).toEqual({
      backup_schedule: { frequency: 'daily', retention: 3 },
    });
    expect(patchBody(before, { ...before, backup: { frequency: '', retention: '7' } })).toEqual({
      backup_schedule: null,
    });
  });

  it('reads back the tag line it writes', () => {
    const tags = { env: 'prod', team: 'web=ops', flag: '' };
    expect(parseTags(formatTags(tags))).toEqual(tags);
    expect(parseTags(' a = 1 ,, b ')).toEqual({ a: '1', b: '' });
  });
});
