import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { invoiceFonts, invoicePdf } from '../src/resources/billing/pdf.js';
import type { InvoiceView } from '../src/resources/billing/view.js';
import { INSTANCE_TYPES, REGION_NAMES } from '../src/resources/catalog/catalog.js';
import { STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { pdfBytes, pdfText } from './helpers/pdf.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = new Date('2026-05-01T00:00:00Z');
const MAY_CLOSED = 31 * DAY + HOUR;
const COMPANY = 'Łódź Ωmega — Müller & "Söhne"';
const JULY = 61 * DAY;

const CSV_COLUMNS = [
  'resource_id',
  'resource_type',
  'meter',
  'description',
  'instance_type',
  'day',
  'quantity',
  'unit',
  'unit_price',
  'amount',
];

type Json = Record<string, any>;

/** One parsed CSV record against the JSON line item it stands for, field by field. */
function expectSameLine(record: Record<string, string>, line: Json) {
  const text = (value: unknown) => (value === null ? '' : String(value));
  const decimals = (value: number | null) => (value === null ? '' : value.toFixed(6));
  expect(record.resource_id).toBe(text(line.resource_id));
  expect(record.resource_type).toBe(line.resource_type);
  expect(record.meter).toBe(line.meter);
  expect(record.description).toBe(line.description);
  expect(record.instance_type).toBe(text(line.instance_type));
  expect(record.day).toBe(text(line.day));
  expect(record.quantity).toBe(decimals(line.quantity));
  expect(Number(record.quantity)).toBe(line.quantity);
  expect(record.unit).toBe(line.unit);
  expect(record.unit_price).toBe(decimals(line.unit_price));
  if (line.unit_price !== null) expect(Number(record.unit_price)).toBe(line.unit_price);
  expect(record.amount).toBe(decimals(line.amount));
  expect(Number(record.amount)).toBe(line.amount);
}

/** Parses a CSV download (RFC 4180: CRLF between records) into its header and records. */
function parseCsv(text: string): { header: string[]; records: Record<string, string>[] } {
  expect(text.endsWith('\r\n')).toBe(true);
  expect(text.replace(/\r\n/g, '').includes('\n')).toBe(false);
  const rows = parse(text, { record_delimiter: '\r\n' }) as string[][];
  const [header, ...body] = rows;
  if (!header) throw new Error('empty CSV');
  const records = parse(text, { columns: true, record_delimiter: '\r\n' }) as Record<string, string>[];
  expect(records).toHaveLength(body.length);
  return { header, records };
}

describe.each(STORES)('Billing documents, estimates and access (%s)', (store) => {
  const clock = new ManualClock(T0);
  let server: TestServer;
  let owner: { id: string; key: string };
  let stranger: { id: string; key: string };
  const ids: Record<string, string> = {};
  const invoices: Record<string, Json> = {};

  const runDue = () => server.running.backends.jobs.runDue();
  const at = async (ms: number) => {
    clock.set(new Date(T0.getTime() + ms));
    await runDue();
  };
  /** Lets simulated work finish: 100 ms of simulated time in 5 ms steps (boots take 8 ms, VPNs 6 ms). */
  const settle = async () => {
    for (let step = 0; step < 20; step++) {
      clock.advance(5);
      await runDue();
    }
  };
  const call = async (method: string, url: string, body?: unknown, expected = 202) => {
    const reply = await server.request(method, url, {
      key: owner.key,
      ...(body === undefined ? {} : { body }),
    });
    expect(reply.status, reply.text).toBe(expected);
    await settle();
    return reply.body?.data;
  };
  const get = async (url: string, key = owner.key) => {
    const reply = await server.request('GET', url, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply;
  };
  const invoiceOf = async (period: string) => {
    const list = (await get(`/v1/billing/invoices?period=${period}`)).body.data;
    expect(list).toHaveLength(1);
    return (await get(`/v1/billing/invoices/${list[0].id}`)).body.data;
  };

  beforeAll(async () => {
    server = await startTestServer({
      store,
      clock,
      steppedJobs: true,
      env: { NIMBUS_SIM_SPEEDUP: '1000', NIMBUS_INVOICE_DUE_DAYS: '14' },
    });
    owner = await account(server);
    stranger = await account(server);
    // A buyer whose name is beyond what PDF's built-in fonts can show.
    const named = await server.request('PATCH', '/v1/account', {
      key: owner.key,
      body: { company: COMPANY, billing_email: 'accounts@example.com' },
    });
    expect(named.status, named.text).toBe(200);
    await at(0);
    const instance = await call('POST', '/v1/instances', {
      name: 'web-blue',
      instance_type: 'compute-2x',
      region: 'us-east-1',
      image: 'ubuntu-24.04',
      // Traffic pinned to none: the figures here are of time (data transfer: billing-transfer.test.ts).
      tags: { 'nimbus.sim/metrics': 'net_tx_bps=0,net_rx_bps=0' },
    });
    ids.instance = instance.id;
    ids.volume = (await call('POST', '/v1/volumes', { name: 'data-main', size_gb: 20, region: 'us-east-1' }))
      .id as string;
    ids.vpn = (await call('POST', '/v1/vpn', { name: 'office', region: 'us-east-1' })).id as string;
    expect((await get(`/v1/instances/${ids.instance}`)).body.data.status).toBe('running');
    expect((await get(`/v1/vpn/${ids.vpn}`)).body.data.status).toBe('active');
  });
  afterAll(async () => {
    await server?.close();
  });

  it('usage so far, 10 h in: each line worked out by hand; the VPN at its catalogue price', async () => {
    await at(10 * HOUR);
    const usage = (await get('/v1/billing/usage')).body.data;
    expect(usage).toMatchObject({
      currency: 'USD',
      start: '2026-05-01T00:00:00.000Z',
      end: '2026-05-01T10:00:00.000Z',
      group_by: 'resource',
    });
    expect(
      usage.line_items.map((l: Json) => [l.resource_id, l.meter, l.quantity, l.unit, l.unit_price, l.amount]),
    ).toEqual([
      [ids.instance, 'instance_compute', 10, 'hour', 0.1, 1],
      // 20 GB × 10 h = 200/730 GB-months; × $0.10
      [ids.volume, 'volume_storage', 0.273973, 'GB-month', 0.1, 0.027397],
      [ids.vpn, 'vpn', 10, 'hour', 0.05, 0.5],
    ]);
    expect(usage.subtotal).toBe(1.527397);
    expect(usage.total).toBe(1.53);
    // The VPN record shows the price billing charges.
    expect((await get(`/v1/vpn/${ids.vpn}`)).body.data.price_per_hour).toBe(0.05);
    await call('POST', `/v1/instances/${ids.instance}/stop`, {});
    expect((await get(`/v1/instances/${ids.instance}`)).body.data.status).toBe('stopped');
  });

  it.each(['resource', 'resource_type', 'instance_type', 'day'])(
    'usage.csv?group_by=%s is the JSON, field by field (csv-parse)',
    async (groupBy) => {
      await at(30 * HOUR);
      const query = `?group_by=${groupBy}&start=2026-05-01T00:00:00Z&end=2026-05-02T06:00:00Z`;
      const json = (await get(`/v1/billing/usage${query}`)).body.data;
      const reply = await get(`/v1/billing/usage.csv${query}`);
      expect(reply.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(reply.headers['content-disposition']).toBe(
        'attachment; filename="nimbus-usage-2026-05-01-2026-05-02.csv"',
      );
      const { header, records } = parseCsv(reply.text);
      expect(header).toEqual(['period_start', 'period_end', ...CSV_COLUMNS]);
      expect(records).toHaveLength(json.line_items.length);
      expect(records.length).toBeGreaterThan(0);
      records.forEach((record, index) => {
        expect(record.period_start).toBe(json.start);
        expect(record.period_end).toBe(json.end);
        expectSameLine(record, json.line_items[index]);
      });
      // The amounts in the file add up to what the JSON's lines add up to.
      const sum = (values: number[]) => values.reduce((a, b) => a + Math.round(b * 1e6), 0);
      expect(sum(records.map((r) => Number(r.amount)))).toBe(sum(json.line_items.map((l: Json) => l.amount)));
    },
  );

  it('quotes what needs quoting (RFC 4180)', async () => {
    const reply = await get('/v1/billing/usage.csv?start=2026-05-01T00:00:00Z&end=2026-05-01T10:00:00Z');
    // Descriptions hold commas: quoted; fields without one are not.
    const lines = reply.text.split('\r\n');
    expect(lines[1]).toBe(
      `2026-05-01T00:00:00.000Z,2026-05-01T10:00:00.000Z,${ids.instance},instance,instance_compute,` +
        `"Instance web-blue (${ids.instance}): compute-2x, running",compute-2x,,10.000000,hour,0.100000,1.000000`,
    );
    const { records } = parseCsv(reply.text);
    expect(records[1]!.description).toBe(`Volume data-main (${ids.volume}): volume storage, 20 GB`);
  });

  it('closing May: the invoice as JSON, each figure by hand', async () => {
    await at(MAY_CLOSED);
    const may = await invoiceOf('2026-05');
    expect(may).toMatchObject({
      number: 'NMB-000001',
      status: 'open',
      currency: 'USD',
      period: '2026-05',
      period_start: '2026-05-01T00:00:00.000Z',
      period_end: '2026-06-01T00:00:00.000Z',
      subtotal: 45.265753,
      total: 45.27,
      issued_at: '2026-06-01T01:00:00.000Z',
      due_at: '2026-06-15T01:00:00.000Z',
      past_due: false,
    });
    expect(
      may.line_items.map((l: Json) => [l.resource_id, l.meter, l.quantity, l.unit_price, l.amount]),
    ).toEqual([
      [ids.instance, 'instance_compute', 10, 0.1, 1],
      [ids.instance, 'instance_storage', 50.273973, 0.1, 5.027397], // 50 GB × 734 h / 730
      [ids.volume, 'volume_storage', 20.383562, 0.1, 2.038356], // 20 GB × 744 h / 730
      [ids.vpn, 'vpn', 744, 0.05, 37.2],
    ]);
    invoices.may = may;
  });

  it('the invoice CSV is the invoice JSON, field by field (csv-parse)', async () => {
    const may = invoices.may!;
    const reply = await get(`/v1/billing/invoices/${may.id}.csv`);
    expect(reply.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(reply.headers['content-disposition']).toBe('attachment; filename="nimbus-invoice-NMB-000001.csv"');
    const { header, records } = parseCsv(reply.text);
    expect(header).toEqual(['invoice_number', 'period', ...CSV_COLUMNS]);
    expect(records).toHaveLength(may.line_items.length);
    records.forEach((record, index) => {
      expect(record.invoice_number).toBe('NMB-000001');
      expect(record.period).toBe('2026-05');
      expectSameLine(record, may.line_items[index]);
    });
  });

  it('the invoice PDF, read back with pdftotext: seller, account, number, period, lines, total', async () => {
    const may = invoices.may!;
    const reply = await server.request('GET', `/v1/billing/invoices/${may.id}.pdf`, { key: owner.key });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('application/pdf');
    expect(reply.headers['content-disposition']).toBe('attachment; filename="nimbus-invoice-NMB-000001.pdf"');
    // The raw bytes (the helper decodes bodies as UTF-8 text, which a PDF is not): fetched again as binary.
    const bytes = await pdfBytes(server, `/v1/billing/invoices/${may.id}.pdf`, owner.key);
    expect(bytes.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    expect(Number(reply.headers['content-length'])).toBe(bytes.length);
    const text = pdfText(bytes);
    expect(text).toMatch(/^\s*Invoice\b/);
    expect(text).toContain('Nimbus Cloud'); // seller
    expect(text).toContain(`Account ${owner.id}`); // buyer
    expect(text).toContain(COMPANY);
    expect(text).toContain('accounts@example.com');
    expect(text).toContain('Invoice number: NMB-000001');
    expect(text).toContain('Period: 2026-05 (2026-05-01 to 2026-06-01');
    expect(text).toContain('Issued: 2026-06-01');
    expect(text).toContain('Due: 2026-06-15');
    expect(text).toMatch(/Total: \$45\.27 USD/);
    expect(text).toContain('$45.265753');
    for (const amount of ['$1.000000', '$5.027397', '$2.038356', '$37.200000']) {
      expect(text).toContain(amount);
    }
    expect(text).toContain('office');
  });

  it('without a Unicode font on the system, what Helvetica cannot show is a ?, never another letter', async () => {
    const view = invoices.may as InvoiceView;
    const pdf = await invoicePdf(view, { name: COMPANY, lines: [] }, invoiceFonts([]));
    expect(pdfText(pdf)).toContain('?ód? ?mega — Müller & "Söhne"');
  });

  it('the running month is a draft: its PDF says so, and its file names say draft', async () => {
    const june = await invoiceOf('2026-06');
    expect(june).toMatchObject({ status: 'draft', number: null });
    const csv = await get(`/v1/billing/invoices/${june.id}.csv`);
    expect(csv.headers['content-disposition']).toBe(
      'attachment; filename="nimbus-invoice-draft-2026-06.csv"',
    );
    const bytes = await pdfBytes(server, `/v1/billing/invoices/${june.id}.pdf`, owner.key);
    const text = pdfText(bytes);
    expect(text).toMatch(/^\s*Draft invoice/);
    expect(text).toContain('Invoice number: not issued yet (draft)');
  });

  it('past due → 402; admin invoice-void makes the account active; June as worked out by hand', async () => {
    await at(31 * DAY + 9 * DAY); // June 10 00:00
    await call('DELETE', `/v1/vpn/${ids.vpn}`);
    await at(31 * DAY + 15 * DAY); // June 16 00:00, past June 15 01:00
    expect((await invoiceOf('2026-05')).past_due).toBe(true);
    const start = `/v1/instances/${ids.instance}/start`;
    expectError(await server.request('POST', start, { key: owner.key, body: {} }), 402, 'payment_required');
    // An operator voids it (the in-process admin CLI, as `nimbus admin invoice-void --json` prints it).
    const voided = await server.admin('invoice-void', '--invoice', invoices.may!.id);
    expect(voided).toEqual({ invoice_id: invoices.may!.id, status: 'void', account_id: owner.id });
    const accounts = (await server.admin('list-accounts')).accounts;
    expect(accounts.find((a: Json) => a.id === owner.id).status).toBe('active');
    await call('POST', start, {});
    await at(31 * DAY + 15 * DAY + 2 * HOUR);
    await call('POST', `/v1/instances/${ids.instance}/stop`, {});
    const may = await invoiceOf('2026-05');
    expect(may).toMatchObject({ status: 'void', past_due: false, voided_at: '2026-06-16T00:00:00.000Z' });
    expect(may.total).toBe(45.27); // a voided invoice keeps its figures

    await at(JULY + HOUR);
    const june = await invoiceOf('2026-06');
    expect(june).toMatchObject({
      number: 'NMB-000002',
      status: 'open',
      subtotal: 17.890411,
      total: 17.89,
      issued_at: '2026-07-01T01:00:00.000Z',
    });
    expect(june.line_items.map((l: Json) => [l.meter, l.quantity, l.amount])).toEqual([
      ['instance_compute', 2, 0.2],
      ['instance_storage', 49.178082, 4.917808],
      ['volume_storage', 19.726027, 1.972603],
      ['vpn', 216, 10.8],
    ]);
    const paid = await server.admin('invoice-pay', '--invoice', june.id);
    expect(paid).toMatchObject({ invoice_id: june.id, status: 'paid' });
    invoices.june = june;
    // Settling twice, or a void after a payment, is refused by the CLI.
    await expect(server.admin('invoice-void', '--invoice', june.id)).rejects.toThrow(/paid/);
    await expect(server.admin('invoice-pay', '--invoice', invoices.may!.id)).rejects.toThrow(/void/);
    await expect(server.admin('invoice-pay', '--invoice', 'inv_nosuchinvoice')).rejects.toThrow(/not found/i);
  });

  it('lists invoices filtered by status and period', async () => {
    const list = async (query: string) =>
      (await get(`/v1/billing/invoices${query}`)).body.data.map((i: Json) => [i.period, i.status]);
    expect(await list('')).toEqual([
      ['2026-07', 'draft'],
      ['2026-06', 'paid'],
      ['2026-05', 'void'],
    ]);
    expect(await list('?order=asc')).toEqual([
      ['2026-05', 'void'],
      ['2026-06', 'paid'],
      ['2026-07', 'draft'],
    ]);
    expect(await list('?status=void')).toEqual([['2026-05', 'void']]);
    expect(await list('?status=paid')).toEqual([['2026-06', 'paid']]);
    expect(await list('?status=draft')).toEqual([['2026-07', 'draft']]);
    expect(await list('?status=open')).toEqual([]);
    expect(await list('?period=2026-06')).toEqual([['2026-06', 'paid']]);
    expect(await list('?period=2026-06&status=paid')).toEqual([['2026-06', 'paid']]);
    expect(await list('?period=2026-06&status=void')).toEqual([]);
    expect(await list('?period=2025-12')).toEqual([]);
    const total = (await get('/v1/billing/invoices?limit=1')).body.pagination;
    expect(total).toMatchObject({ total_items: 3, limit: 1 });

    const badStatus = expectError(
      await server.request('GET', '/v1/billing/invoices?status=closed', { key: owner.key }),
      400,
      'invalid_request',
    );
    expect(badStatus.details).toMatchObject({
      field: 'status',
      allowed_values: ['draft', 'open', 'paid', 'void'],
    });
    for (const period of ['2026-13', '2026-6', 'June', '2026-06-01']) {
      const bad = expectError(
        await server.request('GET', `/v1/billing/invoices?period=${period}`, { key: owner.key }),
        400,
        'invalid_request',
      );
      expect(bad.details?.field).toBe('period');
    }
  });

  it('invoice.created, invoice.past_due and invoice.paid are in /v1/events and in the catalogue', async () => {
    const events = (await get('/v1/events?type=invoice.*&limit=100')).body.data;
    expect(events.map((e: Json) => [e.type, e.resource_id]).reverse()).toEqual([
      ['invoice.created', invoices.may!.id],
      ['invoice.past_due', invoices.may!.id],
      ['invoice.created', invoices.june!.id],
      ['invoice.paid', invoices.june!.id],
    ]);
    expect(events[0]).toMatchObject({
      type: 'invoice.paid',
      timestamp: '2026-07-01T01:00:00.000Z',
      data: { invoice_id: invoices.june!.id, status: 'paid' },
    });
    const catalogue = (await get('/v1/events/types')).body.data;
    const types = new Map(catalogue.map((entry: Json) => [entry.type, entry]));
    for (const type of ['invoice.created', 'invoice.paid', 'invoice.past_due']) {
      expect(types.has(type), type).toBe(true);
    }
    // The stranger's log holds none of them.
    const theirs = (await get('/v1/events?type=invoice.*', stranger.key)).body.data;
    expect(theirs).toEqual([]);
  });

  it('billing:read is needed (403 without it); billing:read alone is enough', async () => {
    const mint = async (permissions: string[]) => {
      const reply = await server.request('POST', '/v1/account/api-keys', {
        key: owner.key,
        body: { name: `billing-${permissions.join('-')}`, permissions },
      });
      expect(reply.status, reply.text).toBe(201);
      return reply.body.data.key as string;
    };
    const without = await mint(['instances:read', 'account:read']);
    const billingRead = await mint(['billing:read']);
    const billingWrite = await mint(['billing:write']);
    const may = invoices.may!.id;
    const reads: [string, string, unknown?][] = [
      ['GET', '/v1/billing/usage'],
      ['GET', '/v1/billing/usage.csv'],
      ['GET', '/v1/billing/invoices'],
      ['GET', `/v1/billing/invoices/${may}`],
      ['GET', `/v1/billing/invoices/${may}.csv`],
      ['GET', `/v1/billing/invoices/${may}.pdf`],
      ['GET', '/v1/billing/estimate?instance_type=compute-1x'],
      ['POST', '/v1/billing/estimate', { items: [{ instance_type: 'compute-1x' }] }],
    ];
    for (const [method, url, body] of reads) {
      const refused = await server.request(method, url, { key: without, ...(body ? { body } : {}) });
      expect(expectError(refused, 403, 'forbidden').message, url).toMatch(/billing:read/);
      for (const key of [billingRead, billingWrite]) {
        const allowed = await server.request(method, url, { key, ...(body ? { body } : {}) });
        expect(allowed.status, `${method} ${url}: ${allowed.text}`).toBe(200);
      }
    }
  });

  it("another account's invoice is 404 in every format; its usage and invoices are its own", async () => {
    for (const suffix of ['', '.csv', '.pdf']) {
      const reply = await server.request('GET', `/v1/billing/invoices/${invoices.may!.id}${suffix}`, {
        key: stranger.key,
      });
      const error = expectError(reply, 404, 'not_found');
      expect(error.details?.resource).toBe('invoice');
    }
    const usage = (await get('/v1/billing/usage?start=2026-05-01T00:00:00Z', stranger.key)).body.data;
    expect(usage.line_items).toEqual([]);
    expect(usage.total).toBe(0);
    const theirs = (await get('/v1/billing/invoices', stranger.key)).body.data;
    expect(theirs.map((i: Json) => [i.period, i.status, i.total])).toEqual([['2026-07', 'draft', 0]]);
    // A made-up id is the same 404.
    expectError(
      await server.request('GET', '/v1/billing/invoices/inv_doesnotexist.pdf', { key: owner.key }),
      404,
      'not_found',
    );
  });
});

describe.each(STORES)('Estimates (%s)', (store) => {
  let server: TestServer;
  let key = '';
  beforeAll(async () => {
    server = await startTestServer({ store });
    ({ key } = await account(server));
  });
  afterAll(async () => {
    await server?.close();
  });
  const estimate = async (query: string) => {
    const reply = await server.request('GET', `/v1/billing/estimate${query}`, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data;
  };

  it('GET: a plan for a month, with its breakdown (3 × compute-2x, 100 GB, 40 GB of snapshots, a VPN)', async () => {
    const month = await estimate(
      '?instance_type=compute-2x&count=3&hours=730&region=us-east-1&volume_gb=100&snapshot_gb=40&vpn_count=1',
    );
    expect(month).toEqual({
      currency: 'USD',
      instance_type: 'compute-2x',
      count: 3,
      hours: 730,
      region: 'us-east-1',
      volume_gb: 100,
      snapshot_gb: 40,
      vpn_count: 1,
      public_ip_count: 0,
      transfer_gb: 0,
      breakdown: [
        {
          item: 'instances',
          description: '3 × compute-2x for 730 h',
          quantity: 2190,
          unit: 'hour',
          unit_price: 0.1,
          amount: 219,
        },
        {
          item: 'volume_storage',
          description: '100 GB of volumes for 730 h',
          quantity: 100,
          unit: 'GB-month',
          unit_price: 0.1,
          amount: 10,
        },
        {
          item: 'snapshot_storage',
          description: '40 GB of snapshots for 730 h',
          quantity: 40,
          unit: 'GB-month',
          unit_price: 0.05,
          amount: 2,
        },
        {
          item: 'vpn',
          description: '1 VPN gateway for 730 h',
          quantity: 730,
          unit: 'hour',
          unit_price: 0.05,
          amount: 36.5,
        },
      ],
      total: 267.5,
    });
    // A day: 3 × 0.1 × 24 + 0.05 × 24 + (100 × 0.1 + 40 × 0.05) × 24/730 = 8.4 + 288/730 = 8.794520…
    const day = await estimate(
      '?instance_type=compute-2x&count=3&hours=24&volume_gb=100&snapshot_gb=40&vpn_count=1',
    );
    expect(day.breakdown.map((line: Json) => line.amount)).toEqual([7.2, 0.328767, 0.065753, 1.2]);
    expect(day.total).toBe(8.794521);
  });

  it('GET: defaults are one instance for 730 h; storage alone needs no type', async () => {
    expect(await estimate('?instance_type=compute-2x')).toMatchObject({
      count: 1,
      hours: 730,
      region: null,
      total: 73,
    });
    const storage = await estimate('?volume_gb=500');
    expect(storage).toMatchObject({ instance_type: null, count: 0, total: 50 });
    expect(storage.breakdown.map((line: Json) => line.item)).toEqual(['volume_storage']);
    // A GPU type where it is offered.
    expect((await estimate('?instance_type=gpu-1x&region=us-west-2&hours=10')).total).toBe(25);
  });

  it('POST: a whole plan, each item priced as GET prices it, and the sum', async () => {
    const items = [
      { instance_type: 'compute-2x', count: 3, region: 'eu-central-1', volume_gb: 100 },
      { snapshot_gb: 40, vpn_count: 1 },
      { instance_type: 'gpu-1x', count: 2, hours: 100, region: 'us-east-1' },
    ];
    const reply = await server.request('POST', '/v1/billing/estimate', { key, body: { items } });
    expect(reply.status, reply.text).toBe(200);
    const plan = reply.body.data;
    expect(plan.items.map((item: Json) => item.total)).toEqual([229, 38.5, 500]);
    expect(plan.total).toBe(767.5);
    // Each item equals the GET of the same parameters.
    const first = await estimate('?instance_type=compute-2x&count=3&region=eu-central-1&volume_gb=100');
    expect(plan.items[0]).toEqual(first);
  });

  const allTypes = INSTANCE_TYPES.map((type) => type.name);
  const badGets: [string, string, string, unknown[] | undefined][] = [
    ['an unknown type', 'instance_type=compute-3x', 'instance_type', allTypes],
    ['an unknown region', 'instance_type=compute-1x&region=mars-1', 'region', REGION_NAMES],
    ['an unknown region, no type', 'volume_gb=10&region=eu-west-9', 'region', REGION_NAMES],
    [
      'a GPU type where none is offered',
      'instance_type=gpu-1x&region=eu-central-1',
      'region',
      ['us-east-1', 'us-west-2'],
    ],
    ['a count without a type', 'count=2', 'instance_type', allTypes],
    ['nothing to price', '', 'instance_type', allTypes],
    ['zero hours', 'instance_type=compute-1x&hours=0', 'hours', undefined],
    ['fractional hours', 'instance_type=compute-1x&hours=1.5', 'hours', undefined],
    ['a negative count', 'instance_type=compute-1x&count=-1', 'count', undefined],
    ['negative storage', 'volume_gb=-5', 'volume_gb', undefined],
    ['a parameter that does not exist', 'instance_type=compute-1x&colour=red', 'colour', undefined],
  ];
  it.each(badGets)('GET with %s is 400 naming the field', async (_what, query, field, allowed) => {
    const reply = await server.request('GET', `/v1/billing/estimate?${query}`, { key });
    const error = expectError(reply, 400, 'invalid_request');
    expect(error.details?.field).toBe(field);
    if (allowed) expect(error.details?.allowed_values).toEqual(allowed);
    else expect(error.details?.allowed_values).toBeUndefined();
  });

  const badPlans: [string, unknown, string, unknown[] | undefined][] = [
    ['no items', { items: [] }, 'items', undefined],
    ['no body field', {}, 'items', undefined],
    [
      'an unknown type in item 2',
      { items: [{ volume_gb: 1 }, { instance_type: 'nope' }] },
      'items.1.instance_type',
      allTypes,
    ],
    [
      'an unknown region in item 1',
      { items: [{ instance_type: 'compute-1x', region: 'mars-1' }] },
      'items.0.region',
      REGION_NAMES,
    ],
    [
      'a GPU type where none is offered',
      { items: [{ volume_gb: 1 }, { instance_type: 'gpu-2x', region: 'ap-northeast-1' }] },
      'items.1.region',
      ['us-east-1', 'us-west-2'],
    ],
    ['an empty item', { items: [{ volume_gb: 1 }, {}] }, 'items.1.instance_type', allTypes],
  ];
  it.each(badPlans)('POST with %s is 400 naming the field', async (_what, body, field, allowed) => {
    const reply = await server.request('POST', '/v1/billing/estimate', { key, body });
    const error = expectError(reply, 400, 'invalid_request');
    expect(error.details?.field).toBe(field);
    if (allowed) expect(error.details?.allowed_values).toEqual(allowed);
  });
});
