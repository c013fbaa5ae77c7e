/**
 * The Billing page's plan calculator against a fake API: the lines on the page become the POST body in
 * their order (a removed middle line takes only its own values with it), and the answer's total and each
 * line's total are shown beside the lines that were sent.
 */
import { fireEvent, render, screen, waitFor, within } from '@testing-library/preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { fakeFetch } from '../../test-fakes.ts';
import { signIn } from '../session.ts';
import { BillingPage } from './billing.tsx';

const EMPTY_PAGE = { data: [], pagination: { page: 1, limit: 50, total: 0, total_pages: 0 } };

function estimateOf(total: number) {
  return {
    currency: 'USD',
    instance_type: null,
    count: 0,
    hours: 730,
    region: null,
    volume_gb: 0,
    snapshot_gb: 0,
    vpn_count: 0,
    breakdown: [
      { item: 'vpn', description: 'priced', quantity: 730, unit: 'hour', unit_price: 0.05, amount: total },
    ],
    total,
  };
}

describe('the plan calculator', () => {
  let sent: unknown[] = [];

  beforeEach(() => {
    sent = [];
    const api = fakeFetch({
      '/v1/billing/usage': () => ({
        ...EMPTY_PAGE,
        data: { line_items: [], total: 0, start: '2026-11-01T00:00:00Z', as_of: '2026-11-27T00:00:00Z' },
      }),
      '/v1/billing/invoices': () => EMPTY_PAGE,
      '/v1/instance-types': () => ({ data: [{ name: 'compute-1x' }, { name: 'compute-2x' }] }),
      '/v1/billing/estimate': async (_url, request) => {
        const body = (await request.json()) as { items: unknown[] };
        sent.push(body);
        const items = body.items.map((_, i) => estimateOf(10 * (i + 1)));
        return { data: { currency: 'USD', items, total: items.reduce((sum, item) => sum + item.total, 0) } };
      },
    });
    vi.stubGlobal('fetch', vi.fn(api.fetch));
    signIn('nmb_billing_test_key');
  });
  afterEach(() => vi.unstubAllGlobals());

  const line = (n: number) => within(screen.getByRole('group', { name: `Line ${n}` }));
  const type = (field: HTMLElement, value: string) => fireEvent.input(field, { target: { value } });

  it('sends the lines in order, without a removed one, and shows the figures per line', async () => {
    render(<BillingPage />);
    await screen.findByRole('option', { name: 'compute-1x' });
    expect(screen.queryByRole('button', { name: /Remove line/ })).toBeNull();
    type(line(1).getByLabelText('Instances'), '3');

    fireEvent.click(screen.getByRole('button', { name: 'Add line' }));
    fireEvent.change(line(2).getByLabelText('Instance type'), { target: { value: 'compute-1x' } });
    type(line(2).getByLabelText('Instances'), '7');

    fireEvent.click(screen.getByRole('button', { name: 'Add line' }));
    fireEvent.change(line(3).getByLabelText('Instance type'), { target: { value: '' } });
    type(line(3).getByLabelText('VPN gateways'), '2');
    fireEvent.change(line(3).getByLabelText('Region'), { target: { value: 'us-west-2' } });

    // The middle line goes; the last one becomes line 2 and keeps its values.
    fireEvent.click(screen.getByRole('button', { name: 'Remove line 2' }));
    expect(screen.queryByRole('group', { name: 'Line 3' })).toBeNull();
    expect((line(2).getByLabelText('VPN gateways') as HTMLInputElement).value).toBe('2');
    expect(line(2).queryByLabelText('Instances')).toBeNull();

    fireEvent.submit(screen.getByRole('form', { name: 'Estimate a plan' }));
    await screen.findByText('Estimate: $30.00');
    expect(sent).toEqual([
      {
        items: [
          { instance_type: 'compute-2x', count: 3, hours: 730, volume_gb: 0, snapshot_gb: 0, vpn_count: 0 },
          { region: 'us-west-2', hours: 730, volume_gb: 0, snapshot_gb: 0, vpn_count: 2 },
        ],
      },
    ]);
    const rows = within(screen.getByRole('table', { name: 'Estimate by line' })).getAllByRole('row');
    expect(rows.map((row) => row.textContent)).toEqual([
      'LinePlanTotal',
      '13 × compute-2x for 730 h$10.00',
      '22 VPN gateways for 730 h$20.00',
    ]);

    // Changing the form afterwards leaves the figures with the lines that were priced.
    type(line(1).getByLabelText('Instances'), '5');
    await waitFor(() => expect(rows[1]!.textContent).toBe('13 × compute-2x for 730 h$10.00'));
  });
});
