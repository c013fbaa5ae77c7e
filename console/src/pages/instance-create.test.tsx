/**
 * The Create instance form's live estimate (instance-create.tsx): the type picker lists the region's
 * catalogue with vCPU, RAM, GPU and price, and the month's estimate follows each choice of type and
 * region from GET /v1/billing/estimate — the latest choice's answer wins even when an earlier request
 * answers after it. The API is a fake fetch the test answers.
 */
import { act, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { LocationProvider } from 'preact-iso';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { signIn } from '../session.ts';
import { InstanceCreatePage } from './instance-create.tsx';

const PRICES: Record<string, number> = { 'compute-1x': 0.01, 'compute-2x': 0.02, 'gpu-1x': 1.5 };
const REGION_FACTOR: Record<string, number> = { 'us-east-1': 1, 'eu-central-1': 1.1 };

function catalogue(region: string) {
  const factor = REGION_FACTOR[region] ?? 1;
  return [
    { name: 'compute-1x', vcpus: 1, memory_gb: 2, gpu: null, price_per_hour: PRICES['compute-1x']! * factor },
    { name: 'compute-2x', vcpus: 2, memory_gb: 4, gpu: null, price_per_hour: PRICES['compute-2x']! * factor },
    {
      name: 'gpu-1x',
      vcpus: 8,
      memory_gb: 32,
      gpu: { count: 1, model: 'A10', memory_gb: 24 },
      price_per_hour: PRICES['gpu-1x']! * factor,
    },
  ];
}

const json = (body: unknown) =>
  new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });

/** Estimate requests, as `type region hours`, in the order sent. */
let estimates: string[] = [];
/** Estimate answers held back until the test releases them (by `type region`). */
let held: Map<string, () => void>;
let holdNext: string | null = null;

async function fakeApi(input: Request | string): Promise<Response> {
  const request = input instanceof Request ? input : new Request(input);
  const url = new URL(request.url);
  const query = url.searchParams;
  switch (url.pathname) {
    case '/v1/instance-types':
      return json({ data: catalogue(query.get('region') ?? '') });
    case '/v1/images':
    case '/v1/ssh-keys':
      return json({ data: [] });
    case '/v1/billing/estimate': {
      const type = query.get('instance_type') ?? '';
      const region = query.get('region') ?? '';
      const hours = Number(query.get('hours'));
      estimates.push(`${type} ${region} ${hours}`);
      const answer = json({
        data: { total: Math.round(PRICES[type]! * (REGION_FACTOR[region] ?? 1) * hours * 100) / 100 },
      });
      const key = `${type} ${region}`;
      if (holdNext === key) {
        holdNext = null;
        return new Promise((resolve) => held.set(key, () => resolve(answer)));
      }
      return answer;
    }
  }
  return new Response(JSON.stringify({ error: { code: 'not_found', message: url.pathname } }), {
    status: 404,
  });
}

const estimateText = () => document.querySelector('.estimate')?.textContent;
const settle = () => act(() => new Promise<void>((resolve) => setTimeout(resolve, 0)));

describe('Create instance: the live estimate', () => {
  beforeEach(() => {
    estimates = [];
    held = new Map();
    holdNext = null;
    vi.stubGlobal('fetch', vi.fn(fakeApi));
    signIn('nmb_form_test_key');
  });
  afterEach(() => vi.unstubAllGlobals());

  const page = () =>
    render(
      <LocationProvider>
        <InstanceCreatePage />
      </LocationProvider>,
    );

  it("lists the region's types with vCPU, RAM, GPU and price, and estimates the default choice", async () => {
    page();
    expect(estimateText()).toBe('Estimating…');
    await waitFor(() => expect(estimateText()).toBe('Estimate: $7.30 a month (730 h)'));
    expect(estimates).toEqual(['compute-1x us-east-1 730']);
    const gpu = screen.getByRole('radio', { name: /gpu-1x/ }).closest('label')!;
    expect(gpu.textContent).toBe('gpu-1x8 vCPU32 GB RAM1× A10$1.50/h');
    expect(screen.getByRole('radio', { name: /compute-1x/ }).closest('label')!.textContent).toContain(
      'no GPU',
    );
    expect((screen.getByRole('radio', { name: /compute-1x/ }) as HTMLInputElement).checked).toBe(true);
  });

  it('follows the type and the region as they change', async () => {
    page();
    await waitFor(() => expect(estimateText()).toBe('Estimate: $7.30 a month (730 h)'));
    fireEvent.click(screen.getByRole('radio', { name: /gpu-1x/ }));
    await waitFor(() => expect(estimateText()).toBe('Estimate: $1095.00 a month (730 h)'));
    fireEvent.change(screen.getByLabelText('Region'), { target: { value: 'eu-central-1' } });
    await waitFor(() => expect(estimateText()).toBe('Estimate: $1204.50 a month (730 h)'));
    // The picker shows the new region's prices.
    await waitFor(() =>
      expect(screen.getByRole('radio', { name: /gpu-1x/ }).closest('label')!.textContent).toContain(
        '$1.65/h',
      ),
    );
    expect(estimates).toEqual([
      'compute-1x us-east-1 730',
      'gpu-1x us-east-1 730',
      'gpu-1x eu-central-1 730',
    ]);
  });

  it("an earlier choice's late answer does not replace the latest one's", async () => {
    page();
    await waitFor(() => expect(estimateText()).toBe('Estimate: $7.30 a month (730 h)'));
    holdNext = 'compute-2x us-east-1';
    fireEvent.click(screen.getByRole('radio', { name: /compute-2x/ }));
    await waitFor(() => expect(held.has('compute-2x us-east-1')).toBe(true));
    fireEvent.click(screen.getByRole('radio', { name: /gpu-1x/ }));
    await waitFor(() => expect(estimateText()).toBe('Estimate: $1095.00 a month (730 h)'));
    held.get('compute-2x us-east-1')!();
    await settle();
    await settle();
    expect(estimateText()).toBe('Estimate: $1095.00 a month (730 h)');
  });
});
