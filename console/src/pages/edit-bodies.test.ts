/**
 * The PATCH bodies of the name-and-tags dialog (snapshots, volumes, public IPs; protection where they have it) and the VPN edit dialog: nothing when
 * untouched, only the changed fields, tags whole, routes compared as lists.
 */
import { describe, expect, it } from 'vitest';
import type { Schemas } from '../api.ts';
import { nameTagsDraftOf, nameTagsPatch } from './name-tags-edit.tsx';
import { cidrList, vpnDraftOf, vpnPatch } from './vpn-edit.ts';

const resource = { name: 'nightly', tags: { env: 'prod', team: 'web' } };
const vpn = { name: 'office', allowed_cidrs: ['192.168.50.0/24', '0.0.0.0/0'] } as unknown as Schemas['Vpn'];

describe('nameTagsPatch', () => {
  it('shows the tags as the line the form reads back', () => {
    expect(nameTagsDraftOf(resource)).toEqual({ name: 'nightly', tags: 'env=prod, team=web' });
  });

  it('sends nothing when nothing changed', () => {
    const draft = nameTagsDraftOf(resource);
    expect(nameTagsPatch(draft, { ...draft })).toEqual({});
  });

  it('sends a new name alone', () => {
    const draft = nameTagsDraftOf(resource);
    expect(nameTagsPatch(draft, { ...draft, name: 'before-upgrade' })).toEqual({ name: 'before-upgrade' });
  });

  it('sends the tags whole when they change, and none at all when emptied', () => {
    const draft = nameTagsDraftOf(resource);
    expect(nameTagsPatch(draft, { ...draft, tags: 'env=prod, keep' })).toEqual({
      tags: { env: 'prod', keep: '' },
    });
    expect(nameTagsPatch(draft, { ...draft, tags: '' })).toEqual({ tags: {} });
  });

  it('switches deletion protection only on resources that have it', () => {
    expect(nameTagsDraftOf(resource).protect).toBeUndefined();
    const draft = nameTagsDraftOf({ ...resource, protection: { delete: false } });
    expect(draft.protect).toBe(false);
    expect(nameTagsPatch(draft, { ...draft })).toEqual({});
    expect(nameTagsPatch(draft, { ...draft, protect: true })).toEqual({ protection: { delete: true } });
  });
});

describe('vpnPatch', () => {
  it('shows the extra routes as one line', () => {
    expect(vpnDraftOf(vpn)).toEqual({ name: 'office', allowed: '192.168.50.0/24, 0.0.0.0/0' });
  });

  it('sends nothing when nothing changed, nor for the same blocks with other separators', () => {
    const draft = vpnDraftOf(vpn);
    expect(vpnPatch(draft, { ...draft })).toEqual({});
    expect(vpnPatch(draft, { ...draft, allowed: ' 192.168.50.0/24   0.0.0.0/0,' })).toEqual({});
  });

  it('sends a new name alone, and new routes as a list', () => {
    const draft = vpnDraftOf(vpn);
    expect(vpnPatch(draft, { ...draft, name: 'hq' })).toEqual({ name: 'hq' });
    expect(vpnPatch(draft, { ...draft, allowed: '10.20.0.0/16' })).toEqual({
      allowed_cidrs: ['10.20.0.0/16'],
    });
  });

  it('an emptied routes field removes every extra route', () => {
    const draft = vpnDraftOf(vpn);
    expect(vpnPatch(draft, { ...draft, allowed: '  ' })).toEqual({ allowed_cidrs: [] });
  });

  it('reads blocks separated by commas, blanks or both', () => {
    expect(cidrList('10.0.0.0/8,172.16.0.0/12  192.168.0.0/16, ')).toEqual([
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
    ]);
  });
});
