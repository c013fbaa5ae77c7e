/**
 * The Public IPs page (public-ips.tsx) against a fake API: what each row offers follows from where the
 * address is (assign or release when unassigned, unassign when assigned, never release then), the assign
 * form lists only the instances of the address's region that have no public IP, and assigning sends the
 * chosen instance.
 */
import { fireEvent, render, screen, waitFor, within } from '@testing-library/preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { fakeFetch } from '../../test-fakes.ts';
import type { Schemas } from '../api.ts';
import { signIn } from '../session.ts';
import { assignableInstances, PublicIpsPage, publicIpActions } from './public-ips.tsx';

type PublicIp = Schemas['PublicIp'];

const at = '2026-05-01T00:00:00.000Z';
const ip = (id: string, name: string, address: string, instanceId: string | null): PublicIp => ({
  id,
  name,
  region: 'us-east-1',
  address,
  instance_id: instanceId,
  auto_delete: instanceId !== null,
  tags: {},
  protection: { delete: false },
  assigned_at: instanceId ? at : null,
  created_at: at,
  updated_at: at,
});
const instance = (id: string, name: string, region: string, publicIp: string | null, status = 'running') =>
  ({ id, name, region, status, public_ip: publicIp }) as Schemas['Instance'];

const INSTANCES = [
  instance('ins_web', 'web-1', 'us-east-1', '203.0.113.2'),
  instance('ins_bare', 'bare-1', 'us-east-1', null),
  instance('ins_west', 'west-1', 'us-west-2', null),
  instance('ins_gone', 'gone-1', 'us-east-1', null, 'deleting'),
];

describe('what a public IP row offers', () => {
  it('assign and release while unassigned; only unassign while assigned', () => {
    expect(publicIpActions({ instance_id: null })).toEqual(['assign', 'release']);
    expect(publicIpActions({ instance_id: 'ins_1' })).toEqual(['unassign']);
  });

  it('assigns only to instances of its region, not being deleted, holding no public IP', () => {
    expect(assignableInstances({ region: 'us-east-1' }, INSTANCES).map((i) => i.id)).toEqual(['ins_bare']);
  });
});

describe('the Public IPs page', () => {
  let assigned: unknown[] = [];
  beforeEach(() => {
    assigned = [];
    const api = fakeFetch({
      '/v1/public-ips': () => ({
        data: [
          ip('ip_web', 'web-1-ip', '203.0.113.2', 'ins_web'),
          ip('ip_spare', 'spare', '203.0.113.9', null),
        ],
        pagination: { page: 1, limit: 20, total: 2, total_pages: 1 },
      }),
      '/v1/instances': () => ({
        data: INSTANCES,
        pagination: { page: 1, limit: 100, total: 4, total_pages: 1 },
      }),
      '/v1/public-ips/ip_spare/assign': async (_url, request) => {
        assigned.push(await request.json());
        return { data: ip('ip_spare', 'spare', '203.0.113.9', 'ins_bare') };
      },
    });
    vi.stubGlobal('fetch', vi.fn(api.fetch));
    signIn('nmb_public_ips_test_key');
  });
  afterEach(() => vi.unstubAllGlobals());

  it('lists addresses with the actions their place allows, and assigns to an instance from the list', async () => {
    render(<PublicIpsPage />);
    const table = await screen.findByRole('table', { name: 'Public IPs' });
    await within(table).findByRole('link', { name: 'web-1' });
    expect(within(table).getByRole('button', { name: 'Unassign web-1-ip' })).toBeTruthy();
    expect(within(table).queryByRole('button', { name: 'Release web-1-ip' })).toBeNull();
    expect(within(table).queryByRole('button', { name: 'Assign web-1-ip' })).toBeNull();
    expect(within(table).getByRole('button', { name: 'Release spare' })).toBeTruthy();

    fireEvent.click(within(table).getByRole('button', { name: 'Assign spare' }));
    const form = await screen.findByRole('form', { name: 'Assign 203.0.113.9' });
    const choices = within(form)
      .getAllByRole('option')
      .map((option) => option.textContent);
    expect(choices).toEqual(['bare-1 (running)']);
    fireEvent.click(within(form).getByRole('button', { name: 'Assign' }));
    await waitFor(() => expect(assigned).toEqual([{ instance_id: 'ins_bare' }]));
    await screen.findByText("203.0.113.9 is now bare-1's address.");
  });
});
