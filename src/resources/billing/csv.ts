/**
 * CSV downloads of usage and invoices (RFC 4180: CRLF line ends, fields quoted when they hold a comma, a
 * quote or a line break, quotes doubled — csv-stringify does the quoting). One header line, then one line
 * per line item; amounts as the JSON view shows them, so the three formats agree.
 */
import { stringify } from 'csv-stringify/sync';
import type { InvoiceView, LineItemView, UsageView } from './view.js';

const COLUMNS = [
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
] as const;

function rows(lines: readonly LineItemView[], leading: readonly string[]): (string | number)[][] {
  return lines.map((line) => [...leading, ...COLUMNS.map((column) => line[column] ?? '')]);
}

/** Fixed decimals, so a spreadsheet sees the same digits the JSON has (no exponent, no lost zeros). */
function fixed(lines: readonly LineItemView[]): LineItemView[] {
  return lines.map((line) => ({
    ...line,
    quantity: line.quantity.toFixed(6) as unknown as number,
    unit_price: (line.unit_price === null ? null : line.unit_price.toFixed(6)) as unknown as number,
    amount: line.amount.toFixed(6) as unknown as number,
  }));
}

const csv = (records: (string | number)[][]) => stringify(records, { record_delimiter: 'windows' });

export function usageCsv(usage: UsageView): string {
  return csv([
    ['period_start', 'period_end', ...COLUMNS],
    ...rows(fixed(usage.line_items), [usage.start, usage.end]),
  ]);
}

export function invoiceCsv(invoice: InvoiceView): string {
  return csv([
    ['invoice_number', 'period', ...COLUMNS],
    ...rows(fixed(invoice.line_items), [invoice.number ?? 'draft', invoice.period]),
  ]);
}
