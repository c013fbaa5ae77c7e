/**
 * Billing to the micro-dollar, on both stores, with a manual clock: the scenario (an instance
 * running 10 h, stopped 5 h, resized, running 3 h, deleted; a 100 GB volume for 15 days; a 40 GB snapshot
 * for a week), with a server restart in the middle, then the month closed into one invoice (twice), the
 * invoice past due (402), paid, and creates working again.
 *
 * The simulator runs a thousand times faster than real time, so every transition completes within
 * milliseconds of its request (a boot 8 ms, a resize 25 ms), which the test steps through; billing takes
 * each end of an interval down to its second, so the billed intervals are exactly the whole hours the test
 * sets with the clock, and the figures below are worked out by hand from the prices (docs/design.md, "Billing"):
 *
 *   compute-2x running 10 h            10 × $0.10                          = $1.000000
 *   its 50 GB root disk stopped 5 h    50 GB × $0.10 × 5/730              = $0.034246575… → 0.034247
 *   compute-4x running 3 h             3 × $0.20                           = $0.600000
 *   100 GB volume, 15 days (360 h)     100 GB × $0.10 × 360/730           = $4.931506849… → 4.931507
 *   40 GB snapshot, 7 days (168 h)     40 GB × $0.05 × 168/730            = $0.460273972… → 0.460274
 *   exact sum                          1.6 + (25 + 3600 + 336)/730         = $7.026027397… → subtotal 7.026027
 *   total (rounded once)                                                    = $7.03
 *
 * (The shown line amounts add up to 7.026028: lines are not rounded before they are summed.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { createPostgresDatabase, STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = new Date('2026-03-01T00:00:00Z');

describe.each(STORES)('Billing to the micro-dollar (%s)', (store) => {
  const clock = new ManualClock(T0);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-billing-'));
  let databaseUrl: string | undefined;
  let drop: (() => Promise<void>) | undefined;
  let server: TestServer;
  let key = '';
  let accountId = '';
  const ids: Record<string, string> = {};

  const start = () =>
    startTestServer({
      store,
      dataDir,
      ...(databaseUrl ? { databaseUrl } : {}),
      clock,
      steppedJobs: true,
      env: { NIMBUS_SIM_SPEEDUP: '1000' },
    });
  const runDue = () => server.running.backends.jobs.runDue();
  const at = async (ms: number) => {
    clock.set(new Date(T0.getTime() + ms));
    await runDue();
  };
  /**
   * Lets simulated work finish: 100 ms of simulated time in 5 ms steps (a resize with its stop and boot takes
   * 38 ms), so the five requests made at T0 all complete within its first second.
   */
  const settle = async () => {
    for (let step = 0; step < 20; step++) {
      clock.advance(5);
      await runDue();
    }
  };
  const call = async (method: string, url: string, body?: unknown, expected = 202) => {
    const reply = await server.request(method, url, { key, ...(body === undefined ? {} : { body }) });
    expect(reply.status, reply.text).toBe(expected);
    await settle();
    return reply.body?.data;
  };
  const status = async (url: string) => (await server.request('GET', url, { key })).body.data.status;

  beforeAll(async () => {
    if (store === 'postgres') ({ url: databaseUrl, drop } = await createPostgresDatabase());
    server = await start();
    ({ id: accountId, key } = await account(server));
  });
  afterAll(async () => {
    await server?.close();
    await drop?.();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('meters the scenario as it happens (usage is live), across a server restart', async () => {
    await at(0);
    const instance = await call('POST', '/v1/instances', {
      name: 'web',
      instance_type: 'compute-2x',
      region: 'us-east-1',
      image: 'ubuntu-24.04',
      // Traffic pinned to none: the figures here are of time (data transfer: billing-transfer.test.ts).
      tags: { 'nimbus.sim/metrics': 'net_tx_bps=0,net_rx_bps=0' },
    });
    ids.instance = instance.id;
    const volume = await call('POST', '/v1/volumes', { name: 'data', size_gb: 100, region: 'us-east-1' });
    ids.volume = volume.id;
    const source = await call('POST', '/v1/volumes', { name: 'src', size_gb: 40, region: 'us-east-1' });
    expect(await status(`/v1/instances/${instance.id}`)).toBe('running');
    expect(await status(`/v1/volumes/${source.id}`)).toBe('available');
    const snapshot = await call('POST', '/v1/snapshots', { name: 'weekly', volume_id: source.id });
    ids.snapshot = snapshot.id;
    expect(await status(`/v1/snapshots/${snapshot.id}`)).toBe('available');
    // The 40 GB source goes at once: it bills 0 seconds, the snapshot outlives it.
    await call('DELETE', `/v1/volumes/${source.id}`);

    // Live usage, 2 h in: 2 h of compute-2x, 2 h of 100 GB and of the 40 GB snapshot.
    await at(2 * HOUR);
    const live = (await server.request('GET', '/v1/billing/usage', { key })).body.data;
    expect(live.end).toBe('2026-03-01T02:00:00.000Z');
    const byResource = Object.fromEntries(live.line_items.map((line: any) => [line.resource_id, line]));
    expect(byResource[instance.id]).toMatchObject({
      quantity: 2,
      unit: 'hour',
      unit_price: 0.1,
      amount: 0.2,
    });
    expect(byResource[volume.id]).toMatchObject({ unit: 'GB-month', unit_price: 0.1, amount: 0.027397 });
    expect(byResource[snapshot.id]).toMatchObject({ unit: 'GB-month', unit_price: 0.05, amount: 0.005479 });
    expect(byResource[source.id]).toBeUndefined();

    await at(10 * HOUR);
    await call('POST', `/v1/instances/${instance.id}/stop`, {});
    expect(await status(`/v1/instances/${instance.id}`)).toBe('stopped');

    // A restart while the instance is stopped: nothing is kept in memory, so nothing changes.
    await at(12 * HOUR);
    const before = (await server.request('GET', '/v1/billing/usage', { key })).body.data;
    await server.close();
    server = await start();
    const after = (await server.request('GET', '/v1/billing/usage', { key })).body.data;
    expect(after.line_items).toEqual(before.line_items);

    await at(15 * HOUR);
    await call('POST', `/v1/instances/${instance.id}/resize`, { instance_type: 'compute-4x' });
    if ((await status(`/v1/instances/${instance.id}`)) === 'stopped') {
      await call('POST', `/v1/instances/${instance.id}/start`, {});
    }
    expect(await status(`/v1/instances/${instance.id}`)).toBe('running');

    await at(18 * HOUR);
    await call('DELETE', `/v1/instances/${instance.id}`);
    expect((await server.request('GET', `/v1/instances/${instance.id}`, { key })).status).toBe(404);

    await at(7 * DAY);
    await call('DELETE', `/v1/snapshots/${snapshot.id}`);
    await at(15 * DAY);
    await call('DELETE', `/v1/volumes/${volume.id}`);
    await at(20 * DAY);
  });

  it('usage for the month: every figure as worked out by hand', async () => {
    const usage = (await server.request('GET', '/v1/billing/usage', { key })).body.data;
    expect(usage.start).toBe('2026-03-01T00:00:00.000Z');
    const lines = usage.line_items.map((line: any) => [
      line.resource_id,
      line.instance_type,
      line.quantity,
      line.unit,
      line.unit_price,
      line.amount,
    ]);
    expect(lines).toEqual([
      [ids.instance, 'compute-2x', 10, 'hour', 0.1, 1],
      [ids.instance, 'compute-4x', 3, 'hour', 0.2, 0.6],
      [ids.instance, 'compute-2x', 0.342466, 'GB-month', 0.1, 0.034247],
      [ids.volume, null, 49.315068, 'GB-month', 0.1, 4.931507],
      [ids.snapshot, null, 9.205479, 'GB-month', 0.05, 0.460274],
    ]);
    expect(usage.subtotal).toBe(7.026027);
    expect(usage.total).toBe(7.03);
  });

  it('groups by resource type, instance type and day, with the same total', async () => {
    const get = async (groupBy: string) =>
      (await server.request('GET', `/v1/billing/usage?group_by=${groupBy}`, { key })).body.data;
    const types = await get('resource_type');
    expect(types.line_items.map((line: any) => [line.resource_type, line.meter, line.amount])).toEqual([
      ['instance', 'instance_compute', 1.6],
      ['instance', 'instance_storage', 0.034247],
      ['volume', 'volume_storage', 4.931507],
      ['snapshot', 'snapshot_storage', 0.460274],
    ]);
    expect(types.line_items[0].unit_price).toBeNull();
    const byType = await get('instance_type');
    expect(byType.line_items.find((line: any) => line.instance_type === 'compute-4x')?.amount).toBe(0.6);
    const days = await get('day');
    // Day 1 holds all of the instance; the volume pays 15 days, the snapshot 7.
    const day1 = days.line_items.filter((line: any) => line.day === '2026-03-01');
    expect(day1.find((line: any) => line.meter === 'instance_compute').amount).toBe(1.6);
    expect(days.line_items.filter((line: any) => line.meter === 'volume_storage')).toHaveLength(15);
    expect(days.line_items.filter((line: any) => line.meter === 'snapshot_storage')).toHaveLength(7);
    for (const grouped of [types, byType, days]) {
      expect(grouped.subtotal).toBe(7.026027);
      expect(grouped.total).toBe(7.03);
    }
  });

  it('the running month is a draft with live figures', async () => {
    const list = (await server.request('GET', '/v1/billing/invoices', { key })).body;
    expect(list.data).toHaveLength(1);
    expect(list.data[0]).toMatchObject({ status: 'draft', number: null, period: '2026-03', total: 7.03 });
    const draft = (await server.request('GET', `/v1/billing/invoices/${list.data[0].id}`, { key })).body.data;
    expect(draft.line_items).toHaveLength(5);
    ids.draft = draft.id;
  });

  it('closing the period makes one open invoice, however often it runs', async () => {
    await at(31 * DAY + HOUR); // 2026-04-01T01:00Z: the billing job has closed March on its own
    const closedAgain = await server.admin('close-period');
    expect(closedAgain.invoices_opened).toBe(0);
    const again = await server.admin('close-period', '--at', '2026-04-01T00:30:00Z');
    expect(again.invoices_opened).toBe(0);
    // A time still to come is refused: April has not ended, and closing it now would bill its future.
    await expect(server.admin('close-period', '--at', '2026-05-01T00:00:00Z')).rejects.toThrow(
      /later than now/,
    );
    const notClosed = (await server.request('GET', '/v1/billing/invoices?period=2026-04', { key })).body.data;
    expect(notClosed.map((invoice: any) => invoice.status)).toEqual(['draft']);
    const march = (await server.request('GET', '/v1/billing/invoices?period=2026-03', { key })).body;
    expect(march.pagination.total_items).toBe(1);
    const invoice = (await server.request('GET', `/v1/billing/invoices/${march.data[0].id}`, { key })).body
      .data;
    expect(invoice).toMatchObject({
      id: ids.draft,
      status: 'open',
      period_start: '2026-03-01T00:00:00.000Z',
      period_end: '2026-04-01T00:00:00.000Z',
      subtotal: 7.026027,
      total: 7.03,
      issued_at: '2026-04-01T01:00:00.000Z',
      due_at: '2026-04-15T01:00:00.000Z',
      past_due: false,
    });
    expect(invoice.number).toMatch(/^NMB-\d{6}$/);
    expect(invoice.line_items.map((line: any) => line.amount)).toEqual([
      1, 0.6, 0.034247, 4.931507, 0.460274,
    ]);
    ids.invoice = invoice.id;
    // April's draft is there now, empty.
    const april = (await server.request('GET', '/v1/billing/invoices?status=draft', { key })).body.data;
    expect(april.map((draft: any) => draft.period)).toEqual(['2026-04']);
    const events = (await server.request('GET', `/v1/events?resource_id=${invoice.id}`, { key })).body.data;
    expect(events.map((event: any) => event.type)).toEqual(['invoice.created']);
  });

  it('an invoice past due makes the account past due (402) until it is paid', async () => {
    const body = { name: 'late', instance_type: 'compute-1x', region: 'us-east-1', image: 'ubuntu-24.04' };
    await at(31 * DAY + 15 * DAY); // 2026-04-16T00:00Z, past due_at
    const refused = await server.request('POST', '/v1/instances', { key, body });
    expectError(refused, 402, 'payment_required');
    const invoice = (await server.request('GET', `/v1/billing/invoices/${ids.invoice}`, { key })).body.data;
    expect(invoice.past_due).toBe(true);
    const account = await server.admin('list-accounts');
    expect(account.accounts.find((a: any) => a.id === accountId).status).toBe('past_due');

    const paid = await server.admin('invoice-pay', '--invoice', ids.invoice!);
    expect(paid).toMatchObject({ status: 'paid' });
    const created = await server.request('POST', '/v1/instances', { key, body });
    expect(created.status, created.text).toBe(202);
    await runDue();

    const events = (await server.request('GET', `/v1/events?resource_id=${ids.invoice}`, { key })).body.data;
    expect(events.map((event: any) => event.type).sort()).toEqual([
      'invoice.created',
      'invoice.paid',
      'invoice.past_due',
    ]);
    // Paying twice is a conflict; so is voiding a paid invoice.
    await expect(server.admin('invoice-pay', '--invoice', ids.invoice!)).rejects.toThrow(/paid/);
    await expect(server.admin('invoice-void', '--invoice', ids.invoice!)).rejects.toThrow(/paid/);
  });
});
