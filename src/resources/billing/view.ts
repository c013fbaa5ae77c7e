/**
 * Billing as the API shows it: exact amounts become USD numbers here and nowhere earlier — line amounts,
 * unit prices and subtotals to 6 decimals (display only), an invoice's `total` rounded once to the cent
 * (resources/billing/rules.ts). JSON, CSV and PDF all read these views, so the three always agree.
 */

import { microsToUsd } from '../../platform/domain/money.js';
import type { EstimatedItem } from './estimate.js';
import { type Invoice, type InvoiceLine, type InvoiceStatus, invoiceNumberText } from './invoice-rules.js';
import {
  type BilledResourceType,
  type BillingUnit,
  centsToUsd,
  type EstimateLine,
  type GroupBy,
  type LineItem,
  type MeterName,
  quantityShown,
  totalCents,
  usdShown,
} from './rules.js';
import type { InvoiceWithLines, Usage } from './service.js';

export interface LineItemView {
  resource_id: string | null;
  resource_type: BilledResourceType;
  meter: MeterName;
  description: string;
  instance_type: string | null;
  day: string | null;
  quantity: number;
  unit: BillingUnit;
  unit_price: number | null;
  amount: number;
}

export function lineItemView(line: LineItem | InvoiceLine): LineItemView {
  return {
    resource_id: line.resource_id,
    resource_type: line.resource_type,
    meter: line.meter,
    description: line.description,
    instance_type: line.instance_type,
    day: 'day' in line ? line.day : null,
    quantity: quantityShown(line.quantity_numerator, line.unit),
    unit: line.unit,
    unit_price: line.unit_price_micros === null ? null : microsToUsd(line.unit_price_micros),
    amount: usdShown(line.amount),
  };
}

export interface UsageView {
  currency: 'USD';
  start: string;
  end: string;
  as_of: string;
  group_by: GroupBy;
  line_items: LineItemView[];
  subtotal: number;
  total: number;
}

/** Usage asked for a page at a time: the view with the page's place among all the lines. */
export function pagedUsageView(usage: Usage) {
  if (!usage.pagination) throw new Error('usage without pagination');
  return { view: usageView(usage), pagination: usage.pagination };
}

export function usageView(usage: Usage): UsageView {
  return {
    currency: 'USD',
    start: usage.start.toISOString(),
    end: usage.end.toISOString(),
    as_of: usage.asOf.toISOString(),
    group_by: usage.groupBy,
    line_items: usage.lines.map(lineItemView),
    subtotal: usdShown(usage.subtotal),
    total: centsToUsd(totalCents(usage.subtotal)),
  };
}

export interface InvoiceSummaryView {
  id: string;
  number: string | null;
  status: InvoiceStatus;
  currency: 'USD';
  period: string;
  period_start: string;
  period_end: string;
  subtotal: number;
  total: number;
  issued_at: string | null;
  due_at: string | null;
  past_due: boolean;
  paid_at: string | null;
  voided_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface InvoiceView extends InvoiceSummaryView {
  line_items: LineItemView[];
}

export function invoiceSummaryView(invoice: Invoice): InvoiceSummaryView {
  return {
    id: invoice.id,
    number: invoice.number === null ? null : invoiceNumberText(invoice.number),
    status: invoice.status,
    currency: 'USD',
    period: invoice.period_start.slice(0, 7),
    period_start: invoice.period_start,
    period_end: invoice.period_end,
    subtotal: usdShown(invoice.subtotal),
    total: centsToUsd(invoice.total_cents),
    issued_at: invoice.issued_at,
    due_at: invoice.due_at,
    past_due: invoice.past_due_at !== null && invoice.status === 'open',
    paid_at: invoice.paid_at,
    voided_at: invoice.voided_at,
    created_at: invoice.created_at,
    updated_at: invoice.updated_at,
  };
}

export function invoiceView({ invoice, lines }: InvoiceWithLines): InvoiceView {
  return { ...invoiceSummaryView(invoice), line_items: lines.map(lineItemView) };
}

export interface EstimateLineView {
  item: EstimateLine['item'];
  description: string;
  quantity: number;
  unit: BillingUnit;
  unit_price: number;
  amount: number;
}

export interface EstimateView {
  currency: 'USD';
  instance_type: string | null;
  count: number;
  hours: number;
  region: string | null;
  volume_gb: number;
  snapshot_gb: number;
  vpn_count: number;
  public_ip_count: number;
  transfer_gb: number;
  breakdown: EstimateLineView[];
  total: number;
}

const estimateLineView = (line: EstimateLine): EstimateLineView => ({
  item: line.item,
  description: line.description,
  quantity: quantityShown(line.quantity_numerator, line.unit),
  unit: line.unit,
  unit_price: microsToUsd(line.unit_price_micros),
  amount: usdShown(line.amount),
});

export function estimateView(item: EstimatedItem): EstimateView {
  return {
    currency: 'USD',
    ...item.request,
    breakdown: item.lines.map(estimateLineView),
    total: usdShown(item.subtotal),
  };
}

export function planEstimateView(plan: { items: EstimatedItem[]; total: bigint }) {
  return { currency: 'USD' as const, items: plan.items.map(estimateView), total: usdShown(plan.total) };
}
