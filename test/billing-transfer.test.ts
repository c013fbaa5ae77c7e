import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { accrueBytes, BYTES_PER_GB, UNITS_PER_MICRO } from '../src/resources/billing/rules.js';
import { type TransferBase, type TransferReading, transferDelta } from '../src/resources/billing/transfer.js';
import { createPostgresDatabase, STORES } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { pdfBytes, pdfText } from './helpers/pdf.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = new Date('2026-03-01T00:00:00Z');
const GB = 2 ** 30;
/** Public bytes an hour: a quarter of the pinned rates. */
const OUT_PER_HOUR = 0.25 * 4_000_000 * 3600;
const IN_PER_HOUR = 0.25 * 8_000_000 * 3600;

describe.each(STORES)('data transfer billing (%s)', (store) => {
  const clock = new ManualClock(T0);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-transfer-'));
  let drop: (() => Promise<void>) | undefined;
  let server: TestServer;
  let key = '';
  let instanceId = '';

  const runDue = () => server.running.backends.jobs.runDue();
  const at = async (ms: number) => {
    clock.set(new Date(T0.getTime() + ms));
    await runDue();
  };
  const settle = async () => {
    for (let step = 0; step < 20; step++) {
      clock.advance(5);
      await runDue();
    }
  };
  const get = async (url: string) => {
    const reply = await server.request('GET', url, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply;
  };
  const transferLines = (lines: any[]) =>
    Object.fromEntries(
      lines.filter((line) => line.meter.startsWith('data_transfer')).map((line) => [line.meter, line]),
    );

  beforeAll(async () => {
    let databaseUrl: string | undefined;
    if (store === 'postgres') ({ url: databaseUrl, drop } = await createPostgresDatabase());
    server = await startTestServer({
      store,
      dataDir,
      ...(databaseUrl ? { databaseUrl } : {}),
      clock,
      steppedJobs: true,
      env: { NIMBUS_SIM_SPEEDUP: '1000' },
    });
    ({ key } = await account(server));
  });
  afterAll(async () => {
    await server?.close();
    await drop?.();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('bills the public bytes an instance sends, shows those it receives, and not its private traffic', async () => {
    await at(0);
    const created = await server.request('POST', '/v1/instances', {
      key,
      body: {
        name: 'web',
        instance_type: 'compute-2x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
        tags: { 'nimbus.sim/metrics': 'net_tx_bps=4000000,net_rx_bps=8000000' },
      },
    });
    expect(created.status, created.text).toBe(202);
    instanceId = created.body.data.id;
    await settle();
    expect((await get(`/v1/instances/${instanceId}`)).body.data.status).toBe('running');

    await at(HOUR);
    const usage = (await get('/v1/billing/usage')).body.data;
    const lines = transferLines(usage.line_items);
    expect(lines.data_transfer).toMatchObject({
      resource_id: instanceId,
      resource_type: 'instance',
      unit: 'GB',
      unit_price: 0.01,
    });
    // The hour less the few simulated milliseconds of the boot.
    expect(lines.data_transfer.quantity).toBeCloseTo(OUT_PER_HOUR / GB, 3);
    expect(lines.data_transfer.amount).toBeCloseTo((OUT_PER_HOUR / GB) * 0.01, 5);
    // Private bytes (three quarters of 4,000,000 B/s) would make it four times that: they are free.
    expect(lines.data_transfer.quantity).toBeLessThan((OUT_PER_HOUR * 1.01) / GB);
    expect(lines.data_transfer_in).toMatchObject({ unit: 'GB', unit_price: 0, amount: 0 });
    expect(lines.data_transfer_in.quantity).toBeCloseTo(IN_PER_HOUR / GB, 3);
    // The subtotal is the hour of compute-2x and the bytes.
    expect(usage.subtotal).toBeCloseTo(0.1 + lines.data_transfer.amount, 5);
  });

  it('keeps counting across a restart, whose counter starts again from zero', async () => {
    const restart = await server.request('POST', `/v1/instances/${instanceId}/restart`, { key, body: {} });
    expect(restart.status, restart.text).toBe(202);
    await settle();
    expect((await get(`/v1/instances/${instanceId}`)).body.data.status).toBe('running');
    await at(2 * HOUR);
    const lines = transferLines((await get('/v1/billing/usage')).body.data.line_items);
    expect(lines.data_transfer.quantity).toBeCloseTo((2 * OUT_PER_HOUR) / GB, 3);
    expect(lines.data_transfer_in.quantity).toBeCloseTo((2 * IN_PER_HOUR) / GB, 3);

    // Stopped, it sends nothing more.
    const stop = await server.request('POST', `/v1/instances/${instanceId}/stop`, { key, body: {} });
    expect(stop.status, stop.text).toBe(202);
    await settle();
    await at(3 * HOUR);
    const after = transferLines((await get('/v1/billing/usage')).body.data.line_items);
    expect(after.data_transfer.quantity).toBe(lines.data_transfer.quantity);
  });

  it('groups by resource type and by day, and the usage CSV has the lines', async () => {
    const byType = transferLines(
      (await get('/v1/billing/usage?group_by=resource_type')).body.data.line_items,
    );
    expect(byType.data_transfer).toMatchObject({
      resource_id: null,
      description: 'Instances: data sent to public addresses',
    });
    const byDay = transferLines((await get('/v1/billing/usage?group_by=day')).body.data.line_items);
    expect(byDay.data_transfer).toMatchObject({ day: '2026-03-01', unit: 'GB' });
    expect(byDay.data_transfer.quantity).toBeCloseTo((2 * OUT_PER_HOUR) / GB, 3);
    const csv = (await get('/v1/billing/usage.csv')).text;
    expect(csv).toContain('data_transfer');
    expect(csv).toContain('data_transfer_in');
  });

  it('the draft invoice, its CSV and PDF, and the closed invoice carry the bytes', async () => {
    const list = (await get('/v1/billing/invoices')).body.data;
    const draft = (await get(`/v1/billing/invoices/${list[0].id}`)).body.data;
    const lines = transferLines(draft.line_items);
    expect(lines.data_transfer.quantity).toBeCloseTo((2 * OUT_PER_HOUR) / GB, 3);
    const csv = (await get(`/v1/billing/invoices/${draft.id}.csv`)).text;
    expect(csv).toContain('data_transfer');
    const text = pdfText(await pdfBytes(server, `/v1/billing/invoices/${draft.id}.pdf`, key));
    // Descriptions wrap in the PDF's column: the line's quantity, unit, price and amount, by the words.
    expect(text).toContain('data sent');
    const row = text.split('\n').find((line) => / GB +\$0\.0100/.test(line));
    expect(row).toContain(`${lines.data_transfer.quantity.toFixed(6)} GB`);
    expect(row).toContain(`$${lines.data_transfer.amount.toFixed(6)}`);

    await at(31 * DAY + HOUR); // April: the billing job has closed March
    const march = (await get('/v1/billing/invoices?period=2026-03')).body.data[0];
    expect(march.status).toBe('open');
    const closed = transferLines((await get(`/v1/billing/invoices/${march.id}`)).body.data.line_items);
    expect(closed.data_transfer).toEqual(lines.data_transfer);
    expect(closed.data_transfer_in).toEqual(lines.data_transfer_in);
  });

  it('the estimate prices transfer_gb', async () => {
    const estimate = (await get('/v1/billing/estimate?transfer_gb=250')).body.data;
    expect(estimate.transfer_gb).toBe(250);
    expect(estimate.breakdown).toEqual([
      {
        item: 'data_transfer',
        description: '250 GB sent to public addresses',
        quantity: 250,
        unit: 'GB',
        unit_price: 0.01,
        amount: 2.5,
      },
    ]);
    expect(estimate.total).toBe(2.5);
  });
});

describe('the counter rule (pure)', () => {
  // A counter's history: lives (a reset between two), each a rising series of readings from zero.
  const life = fc.array(fc.tuple(fc.nat(1_000_000), fc.nat(1_000_000)), { minLength: 1, maxLength: 8 });
  const lives = fc.array(life, { minLength: 1, maxLength: 5 });
  const cumulative = (steps: [number, number][]) => {
    let out = 0;
    let inBytes = 0;
    return steps.map(([o, i]) => {
      out += o;
      inBytes += i;
      return { bytesOut: out, bytesIn: inBytes };
    });
  };

  it('never subtracts, counts each life whole when the epoch names it, and never counts a byte twice', () => {
    fc.assert(
      fc.property(lives, fc.boolean(), (history, withEpoch) => {
        let base: TransferBase | null = null;
        let billedOut = 0;
        let billedIn = 0;
        let sentOut = 0;
        let sentIn = 0;
        history.forEach((steps, n) => {
          const readings = cumulative(steps);
          for (const reading of readings) {
            const read: TransferReading = { ...reading, epoch: withEpoch ? `boot-${n}` : null };
            const delta = transferDelta(base, read);
            expect(delta.out).toBeGreaterThanOrEqual(0);
            expect(delta.in).toBeGreaterThanOrEqual(0);
            billedOut += delta.out;
            billedIn += delta.in;
            base = delta.base;
            // Read again at once: nothing new.
            const again = transferDelta(base, read);
            expect([again.out, again.in]).toEqual([0, 0]);
          }
          const last = readings.at(-1)!;
          sentOut += last.bytesOut;
          sentIn += last.bytesIn;
        });
        // Never more than was sent; with epochs, exactly what was sent.
        expect(billedOut).toBeLessThanOrEqual(sentOut);
        expect(billedIn).toBeLessThanOrEqual(sentIn);
        if (withEpoch) {
          expect(billedOut).toBe(sentOut);
          expect(billedIn).toBe(sentIn);
        }
      }),
    );
  });

  it('a GB (2^30 bytes) costs exactly 0.01 USD, and bytes are priced to within one accrual unit', () => {
    expect(accrueBytes(BYTES_PER_GB, 10_000)).toBe(10_000n * UNITS_PER_MICRO);
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 50n }), (bytes) => {
        const exactTimesGb = bytes * 10_000n * UNITS_PER_MICRO;
        const amount = accrueBytes(bytes, 10_000);
        const error = amount * BYTES_PER_GB - exactTimesGb;
        expect(error * 2n <= BYTES_PER_GB && error * 2n > -BYTES_PER_GB).toBe(true);
      }),
    );
  });

  it('a lower reading is a new base, counted from zero', () => {
    fc.assert(
      fc.property(fc.nat(2 ** 40), fc.nat(2 ** 40), fc.nat(2 ** 40), (a, b, c) => {
        const base = { bytesOut: a + 1, bytesIn: b, epoch: null };
        const delta = transferDelta(base, { bytesOut: Math.min(c, a), bytesIn: b + c });
        expect(delta.out).toBe(Math.min(c, a));
        expect(delta.in).toBe(b + c);
        expect(delta.base).toEqual({ bytesOut: Math.min(c, a), bytesIn: b + c, epoch: null });
      }),
    );
  });
});
