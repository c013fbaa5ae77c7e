/**
 * Billing routes: usage (JSON and CSV), invoices (JSON, CSV, PDF) and estimates. The `.csv`/`.pdf` routes
 * sit beside `/invoices/{id}`: the router (find-my-way) matches a parameter followed by fixed text before
 * the bare parameter, so `inv_….pdf` is never taken for an id (tested both ways in test/billing-*.test.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { ok, okList } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses, withExample } from '../../platform/http/responses.js';
import {
  Envelope,
  IdParams,
  ListEnvelope,
  ListQuery,
  PaginationSchema,
  StringEnum,
  Timestamp,
} from '../../platform/http/schemas.js';
import { INSTANCE_TYPES, REGION_NAMES } from '../catalog/catalog.js';
import { estimateItem, estimatePlan } from './estimate.js';
import { InvoiceRecord } from './invoice-record.js';
import { INVOICE_SORTS, INVOICE_STATUSES } from './invoice-rules.js';
import { ESTIMATE_ITEMS, GROUP_BYS, METERS, PERIOD_PATTERN, RESOURCE_TYPES } from './rules.js';
import { type BillingService, type Download, USAGE_PAGE_SIZE } from './service.js';
import { estimateView, invoiceSummaryView, invoiceView, pagedUsageView, planEstimateView } from './view.js';

const Usd = (description: string) => Type.Number({ description });
/**
 * A value or null, as a type list rather than anyOf: an answer may hold tens of thousands of line items,
 * and the serialiser picks a type list's branch by typeof instead of validating each value.
 */
const orNull = <T>(type: 'string' | 'number', options: Record<string, unknown> = {}) =>
  Type.Unsafe<T | null>({ type: [type, 'null'], ...options });

const LineItem = Type.Object(
  {
    resource_id: orNull<string>('string', {
      description: 'The resource (group_by=resource); null for lines that add up several',
    }),
    resource_type: StringEnum(RESOURCE_TYPES),
    meter: StringEnum(METERS, {
      description:
        'What is paid for: an instance running, its root disk while not running, storage, a VPN, ' +
        'a public IP held unassigned, bytes to public addresses (data_transfer; received: data_transfer_in, free)',
    }),
    description: Type.String(),
    instance_type: orNull<string>('string'),
    day: orNull<string>('string', { format: 'date', description: 'group_by=day: the UTC day' }),
    quantity: Type.Number({
      description: 'Hours, GB-months (730 h) or GB (2^30 bytes), 6 decimals',
    }),
    unit: StringEnum(['hour', 'GB-month', 'GB'] as const),
    unit_price: orNull<number>('number', {
      description: 'USD per unit; null when the line adds up several prices',
    }),
    amount: Usd('USD, exact to the micro-dollar (6 decimals); not rounded before the total'),
  },
  { title: 'BillingLineItem' },
);

const Usage = Type.Object(
  {
    currency: Type.Literal('USD'),
    start: Timestamp,
    end: Timestamp,
    as_of: Type.String({
      format: 'date-time',
      description: 'Intervals still running are counted up to here',
    }),
    group_by: StringEnum(GROUP_BYS),
    line_items: Type.Array(LineItem),
    subtotal: Usd('The exact sum, 6 decimals'),
    total: Usd('The exact sum rounded once to the cent (half up)'),
  },
  { $id: 'Usage', title: 'Usage' },
);

// Computed from the record (invoice-record.ts): what it holds as it is comes from its declaration.
const invoiceFields = {
  id: InvoiceRecord.properties.id,
  number: Type.Union([Type.String(), Type.Null()], {
    description:
      'NMB-000001…: sequential per deployment, given when the invoice opens, never reused; null while draft',
  }),
  status: InvoiceRecord.properties.status,
  currency: Type.Literal('USD'),
  period: Type.String({ description: 'YYYY-MM' }),
  period_start: InvoiceRecord.properties.period_start,
  period_end: Type.String({ format: 'date-time', description: 'Exclusive' }),
  subtotal: Usd('The exact sum of the line items, 6 decimals'),
  total: Usd('What is owed: the exact sum rounded once to the cent (2 decimals)'),
  ...Type.Pick(InvoiceRecord, ['issued_at', 'due_at']).properties,
  past_due: Type.Boolean({ description: 'Open and past due_at: the account is past due until it is paid' }),
  ...Type.Pick(InvoiceRecord, ['paid_at', 'voided_at', 'created_at', 'updated_at']).properties,
};

const InvoiceSummary = Type.Object(invoiceFields, { $id: 'InvoiceSummary', title: 'InvoiceSummary' });
const Invoice = Type.Object(
  { ...invoiceFields, line_items: Type.Array(LineItem) },
  { $id: 'Invoice', title: 'Invoice' },
);

const UsageQuery = Type.Object(
  {
    start: Type.Optional(
      Type.String({ format: 'date-time', description: 'Default: the start of the current month (UTC)' }),
    ),
    end: Type.Optional(Type.String({ format: 'date-time', description: 'Exclusive; default: now' })),
    group_by: Type.Optional(StringEnum(GROUP_BYS, { description: 'Default: resource' })),
  },
  { additionalProperties: false },
);

const PagedUsageQuery = Type.Object(
  {
    ...UsageQuery.properties,
    page: Type.Integer({ minimum: 1, default: 1 }),
    limit: Type.Integer({
      minimum: 1,
      maximum: USAGE_PAGE_SIZE,
      default: USAGE_PAGE_SIZE,
      description: `Lines per page (default and most: ${USAGE_PAGE_SIZE}); subtotal and total are the whole window's`,
    }),
  },
  { additionalProperties: false },
);

const UsageEnvelope = Type.Object({ ...Envelope(Usage).properties, pagination: PaginationSchema });

const ListInvoicesQuery = ListQuery(
  INVOICE_SORTS,
  { sort: 'period_start' },
  {
    status: Type.Optional(StringEnum(INVOICE_STATUSES)),
    period: Type.Optional(Type.String({ pattern: PERIOD_PATTERN, description: 'YYYY-MM' })),
  },
);

const estimateFields = {
  instance_type: Type.Optional(StringEnum(INSTANCE_TYPES.map((type) => type.name))),
  count: Type.Optional(
    Type.Integer({ minimum: 0, maximum: 10_000, description: 'Default 1 with an instance_type' }),
  ),
  hours: Type.Optional(Type.Integer({ minimum: 1, maximum: 87_600, description: 'Default 730 (a month)' })),
  region: Type.Optional(
    StringEnum(REGION_NAMES, { description: 'Checked against where the type is offered' }),
  ),
  volume_gb: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000_000 })),
  snapshot_gb: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000_000 })),
  vpn_count: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000 })),
  public_ip_count: Type.Optional(
    Type.Integer({ minimum: 0, maximum: 10_000, description: 'Public IPs held unassigned the whole time' }),
  ),
  transfer_gb: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 10_000_000,
      description: 'GB (2^30 bytes) sent to public addresses',
    }),
  ),
};

const EstimateQuery = Type.Object(estimateFields, { additionalProperties: false });
const EstimateItem = Type.Object(estimateFields, { additionalProperties: false });

const EstimateLine = Type.Object({
  item: StringEnum(ESTIMATE_ITEMS),
  description: Type.String(),
  quantity: Type.Number({
    description: 'Hours (instances × hours, VPNs × hours), GB-months or GB',
  }),
  unit: StringEnum(['hour', 'GB-month', 'GB'] as const),
  unit_price: Usd('USD per unit'),
  amount: Usd('USD, 6 decimals'),
});

const estimateOutFields = {
  currency: Type.Literal('USD'),
  instance_type: Type.Union([Type.String(), Type.Null()]),
  count: Type.Integer(),
  hours: Type.Integer(),
  region: Type.Union([Type.String(), Type.Null()]),
  volume_gb: Type.Integer(),
  snapshot_gb: Type.Integer(),
  vpn_count: Type.Integer(),
  public_ip_count: Type.Integer(),
  transfer_gb: Type.Integer(),
  breakdown: Type.Array(EstimateLine),
  total: Usd('USD, 6 decimals'),
};
const Estimate = Type.Object(estimateOutFields, { title: 'Estimate' });
const PlanEstimate = Type.Object(
  { currency: Type.Literal('USD'), items: Type.Array(Estimate), total: Usd('USD, 6 decimals') },
  { $id: 'PlanEstimate', title: 'PlanEstimate' },
);
const Plan = Type.Object(
  { items: Type.Array(EstimateItem, { minItems: 1, maxItems: 100 }) },
  { title: 'EstimateRequest', additionalProperties: false },
);

const Pdf = { content: { 'application/pdf': { schema: { type: 'string', format: 'binary' } } } };
const Csv = { content: { 'text/csv': { schema: { type: 'string' } } } };

/** Sends a file as a download: its type, and the name a browser saves it under. */
function download(reply: FastifyReply, file: Download) {
  return reply
    .type(file.contentType)
    .header('content-disposition', `attachment; filename="${file.filename}"`)
    .send(file.body);
}

export const billingRoutes: FastifyPluginAsyncTypebox<{ billing: BillingService }> = async (
  app,
  { billing },
) => {
  const read = { permission: ['billing', 'read'] } as const;
  const tags = ['billing'];
  const accountOf = (request: Parameters<typeof principalOf>[0]) => principalOf(request).accountId;

  app.get(
    '/billing/usage',
    {
      schema: {
        tags,
        summary: 'Get usage (live)',
        description:
          'What the account has used between `start` and `end` (default: this month so far), metered per second from ' +
          'recorded state changes: running instances at their hourly price, stopped ones for their root disk, volumes ' +
          'and snapshots per GB-month, VPN gateways per hour. Grouped by resource (default), resource_type, ' +
          'instance_type or day. The lines come a page at a time (`page`, `limit`: up to 1,000 lines a page, ' +
          "`pagination` as in lists); `subtotal` and `total` are always the whole window's.",
        querystring: PagedUsageQuery,
        response: {
          200: described(UsageEnvelope, "Usage (a page of its lines) and the whole window's totals"),
        },
      },
      // Numbered pages on /v2 too: an answer is worked out whole each time, so a cursor would save nothing.
      config: { ...read, numberedPages: true },
    },
    async (request) => {
      const { page, limit, ...query } = request.query;
      const { view, pagination } = pagedUsageView(
        await billing.usage(accountOf(request), query, { page, limit }),
      );
      return { ...ok(request, view), pagination };
    },
  );

  app.get(
    '/billing/usage.csv',
    {
      schema: {
        tags,
        summary: 'Download usage as CSV',
        description:
          'The same line items as `GET /v1/billing/usage`, one CSV line each (RFC 4180), after a header line.',
        querystring: UsageQuery,
        response: { 200: { description: 'text/csv, as an attachment', ...Csv } },
      },
      config: read,
    },
    async (request, reply) => download(reply, await billing.usageCsv(accountOf(request), request.query)),
  );

  app.get(
    '/billing/invoices',
    {
      schema: {
        tags,
        summary: 'List invoices',
        description:
          "One invoice per month: the running month's `draft` (live figures), then `open`, `paid` or `void`. " +
          'Filter by `status` and `period` (YYYY-MM). Line items are on `GET /v1/billing/invoices/{id}`.',
        querystring: ListInvoicesQuery,
        response: { 200: described(ListEnvelope(InvoiceSummary), 'A page of invoices') },
      },
      config: read,
    },
    async (request) => {
      const { status, period, ...page } = request.query;
      const found = await billing.listInvoices(accountOf(request), { status, period }, page);
      return okList(request, { items: found.items.map(invoiceSummaryView), pagination: found.pagination });
    },
  );

  app.get(
    '/billing/invoices/:id',
    {
      schema: {
        tags,
        summary: 'Get invoice',
        description: 'The invoice with its line items; an invoice of another account is a 404.',
        params: IdParams,
        response: { 200: described(Envelope(Invoice), 'The invoice'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) =>
      ok(request, invoiceView(await billing.getInvoice(accountOf(request), request.params.id))),
  );

  app.get(
    '/billing/invoices/:id.pdf',
    {
      schema: {
        tags,
        summary: 'Download invoice as PDF',
        description: 'Seller, account, number, period, line items and totals.',
        params: IdParams,
        response: {
          200: { description: 'application/pdf, as an attachment', ...Pdf },
          ...errorResponses(404),
        },
      },
      config: read,
    },
    async (request, reply) =>
      download(reply, await billing.invoicePdf(accountOf(request), request.params.id)),
  );

  app.get(
    '/billing/invoices/:id.csv',
    {
      schema: {
        tags,
        summary: 'Download invoice as CSV',
        description: 'One CSV line per line item (RFC 4180), after a header line.',
        params: IdParams,
        response: { 200: { description: 'text/csv, as an attachment', ...Csv }, ...errorResponses(404) },
      },
      config: read,
    },
    async (request, reply) =>
      download(reply, await billing.invoiceCsv(accountOf(request), request.params.id)),
  );

  app.get(
    '/billing/estimate',
    {
      schema: {
        tags,
        summary: 'Estimate cost',
        description:
          'What `count` instances of a type running for `hours` (default 730) cost, with volumes, snapshots and VPN ' +
          'gateways beside them, and data transfer, priced as usage is. A type not offered in `region` is a 400 naming the regions ' +
          'that offer it.',
        querystring: EstimateQuery,
        response: { 200: described(Envelope(Estimate), 'The estimate with its breakdown') },
      },
      config: read,
    },
    async (request) => ok(request, estimateView(estimateItem(request.query))),
  );

  app.post(
    '/billing/estimate',
    {
      schema: {
        tags,
        summary: 'Estimate a plan',
        description:
          'A whole plan at once (a cart): each item as `GET /v1/billing/estimate` takes it, and the total.',
        body: withExample(Plan, {
          items: [
            { instance_type: 'compute-2x', count: 3, region: 'eu-central-1', volume_gb: 100 },
            { snapshot_gb: 40, vpn_count: 1 },
          ],
        }),
        response: { 200: described(Envelope(PlanEstimate), 'Every item priced, and the total') },
      },
      config: read,
    },
    async (request) => ok(request, planEstimateView(estimatePlan(request.body.items))),
  );
};
