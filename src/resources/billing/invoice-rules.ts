/**
 * Invoices as records: their statuses and what moves them. One invoice per account and calendar month:
 * `draft` while the month runs (its lines computed live), `open` when the period closes (lines, totals and
 * a number fixed), then `paid` or `void` by an operator. An open invoice past `due_at` makes the account
 * `past_due` until it is paid or voided.
 */
import type { Invoice } from './invoice-record.js';
import type { BilledResourceType, BillingUnit, MeterName } from './rules.js';

export const INVOICE_STATUSES = ['draft', 'open', 'paid', 'void'] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];

/** Which statuses an operator's action takes an invoice from. */
export const INVOICE_ACTIONS = {
  pay: { from: ['open'], to: 'paid' },
  void: { from: ['open'], to: 'void' },
} as const satisfies Record<string, { from: readonly InvoiceStatus[]; to: InvoiceStatus }>;
export type InvoiceAction = keyof typeof INVOICE_ACTIONS;

/** An invoice as the services see it: declared once, as a TypeBox record (invoice-record.ts). */
export type { Invoice };

export interface InvoiceLine {
  resource_id: string | null;
  resource_type: BilledResourceType;
  meter: MeterName;
  description: string;
  instance_type: string | null;
  unit: BillingUnit;
  quantity_numerator: bigint;
  unit_price_micros: number | null;
  amount: bigint;
}

/** Invoice numbers as people read them: `NMB-` and six digits at least (the number itself is the integer). */
export const invoiceNumberText = (number: number): string => `NMB-${String(number).padStart(6, '0')}`;

export const INVOICE_SORTS = ['period_start', 'created_at'] as const;
