/**
 * Invoices, their lines and the billing counters. Invoices are `Invoice` records (invoice-record.ts); the
 * invoices table is derived from the record and rows are decoded through its codecs (exact amounts from
 * decimal text and integer cents to bigint). Every status write is guarded by the version read.
 */
import { sql } from 'kysely';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import {
  type ColumnCodec,
  nullableNumberColumn,
  numberColumn,
  type RowFor,
  recordRows,
} from '../../platform/store/record-table.js';
import type { Executor } from '../../platform/store/schema.js';
import { InvoiceRecord } from './invoice-record.js';
import type { Invoice, InvoiceLine, InvoiceStatus } from './invoice-rules.js';
import type { BilledResourceType, BillingUnit, MeterName } from './rules.js';

/** An exact amount (1/2,628,000 micro-USD: resources/billing/rules.ts) kept as decimal text. */
const decimalText: ColumnCodec<bigint, string> = {
  encode: (field) => field.toString(),
  decode: (column) => BigInt(column),
};

/** Whole cents kept as an integer column (PostgreSQL's bigint comes back as text). */
const centsInteger: ColumnCodec<bigint, number> = {
  encode: (field) => Number(field),
  decode: (column) => BigInt(column),
};

/** Amounts are exact integers; the number and version are read as numbers; every other field is its column. */
const codecs = {
  number: nullableNumberColumn,
  subtotal: decimalText,
  total_cents: centsInteger,
  version: numberColumn,
};

/** The invoices table: the record's fields as columns. */
export type InvoicesTable = RowFor<Invoice, typeof codecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    invoices: InvoicesTable;
  }
}

const invoiceRows = recordRows({ table: 'invoices', record: InvoiceRecord, codecs });
const decoded = invoiceRows.decode;
const encoded = (invoice: Invoice): InvoicesTable => invoiceRows.encode(invoice) as InvoicesTable;

export async function findInvoice(db: Executor, id: string): Promise<Invoice | undefined> {
  const row = await db.selectFrom('invoices').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? decoded(row) : undefined;
}

export async function findAccountInvoice(
  db: Executor,
  accountId: string,
  id: string,
): Promise<Invoice | undefined> {
  const row = await db
    .selectFrom('invoices')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row ? decoded(row) : undefined;
}

/** Holds the invoice until the transaction ends (PostgreSQL; SQLite runs one writer at a time). */
export async function lockInvoice(db: Executor, id: string): Promise<Invoice | undefined> {
  let query = db.selectFrom('invoices').selectAll().where('id', '=', id);
  if (isPostgres(db)) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row ? decoded(row) : undefined;
}

/** The invoices of these accounts for the period starting at `periodStart`. */
export async function invoicesOfPeriod(
  db: Executor,
  periodStart: string,
  accountIds: readonly string[],
): Promise<Invoice[]> {
  if (accountIds.length === 0) return [];
  const rows = await db
    .selectFrom('invoices')
    .selectAll()
    .where('period_start', '=', periodStart)
    .where('account_id', 'in', accountIds)
    .execute();
  return rows.map(decoded);
}

/** Accounts holding a draft for the period (a period closing also settles drafts without usage). */
export async function accountsWithDraft(db: Executor, periodStart: string): Promise<string[]> {
  const rows = await db
    .selectFrom('invoices')
    .select('account_id')
    .where('period_start', '=', periodStart)
    .where('status', '=', 'draft')
    .execute();
  return rows.map((row) => row.account_id);
}

/** Inserts the invoice unless the account has one for its period already. */
export async function insertInvoiceIfAbsent(db: Executor, invoice: Invoice): Promise<void> {
  await db
    .insertInto('invoices')
    .values(encoded(invoice))
    .onConflict((oc) => oc.columns(['account_id', 'period_start']).doNothing())
    .execute();
}

export async function insertInvoice(db: Executor, invoice: Invoice): Promise<void> {
  await db.insertInto('invoices').values(encoded(invoice)).execute();
}

export async function deleteDraft(db: Executor, invoice: Invoice): Promise<void> {
  await db
    .deleteFrom('invoices')
    .where('id', '=', invoice.id)
    .where('status', '=', 'draft')
    .where('version', '=', invoice.version)
    .execute();
}

export type InvoiceChanges = Partial<Omit<Invoice, 'id' | 'account_id' | 'version' | 'created_at'>>;

/** Writes `changes` if the invoice is still at the version read; undefined when another writer won. */
export async function updateInvoice(
  db: Executor,
  current: Invoice,
  changes: InvoiceChanges,
): Promise<Invoice | undefined> {
  const row = await db
    .updateTable('invoices')
    .set({ ...invoiceRows.encode(changes), version: current.version + 1 })
    .where('id', '=', current.id)
    .where('version', '=', current.version)
    .returningAll()
    .executeTakeFirst();
  return row ? decoded(row) : undefined;
}

export interface InvoiceFilter {
  status?: InvoiceStatus | undefined;
  periodStart?: string | undefined;
}

export async function listInvoices(
  db: Executor,
  accountId: string,
  filter: InvoiceFilter,
  request: PageRequest,
): Promise<Page<Invoice>> {
  let query = db.selectFrom('invoices').selectAll().where('account_id', '=', accountId);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.periodStart) query = query.where('period_start', '=', filter.periodStart);
  const page = await fetchPage(query, request);
  return { items: page.items.map(decoded), pagination: page.pagination };
}

export async function insertLines(
  db: Executor,
  invoiceId: string,
  lines: readonly InvoiceLine[],
): Promise<void> {
  if (lines.length === 0) return;
  // A few hundred rows per statement keeps under either engine's limit of bound parameters.
  for (let from = 0; from < lines.length; from += 500) {
    await db
      .insertInto('invoice_lines')
      .values(
        lines.slice(from, from + 500).map((line, index) => ({
          invoice_id: invoiceId,
          position: from + index + 1,
          resource_id: line.resource_id,
          resource_type: line.resource_type,
          meter: line.meter,
          description: line.description,
          instance_type: line.instance_type,
          unit: line.unit,
          quantity_numerator: line.quantity_numerator.toString(),
          unit_price_micros: line.unit_price_micros,
          amount: line.amount.toString(),
        })),
      )
      .execute();
  }
}

export async function linesOf(db: Executor, invoiceId: string): Promise<InvoiceLine[]> {
  const rows = await db
    .selectFrom('invoice_lines')
    .selectAll()
    .where('invoice_id', '=', invoiceId)
    .orderBy('position')
    .execute();
  return rows.map((row) => ({
    resource_id: row.resource_id,
    resource_type: row.resource_type as BilledResourceType,
    meter: row.meter as MeterName,
    description: row.description,
    instance_type: row.instance_type,
    unit: row.unit as BillingUnit,
    quantity_numerator: BigInt(row.quantity_numerator),
    unit_price_micros: row.unit_price_micros === null ? null : Number(row.unit_price_micros),
    amount: BigInt(row.amount),
  }));
}

/** Open invoices past due that have not made their account past due yet. */
export async function newlyOverdue(db: Executor, now: string, limit: number): Promise<Invoice[]> {
  const rows = await db
    .selectFrom('invoices')
    .selectAll()
    .where('status', '=', 'open')
    .where('due_at', '<=', now)
    .where('past_due_at', 'is', null)
    .orderBy('due_at')
    .limit(limit)
    .execute();
  return rows.map(decoded);
}

/** When the next open invoice falls due (that has not yet); null when none will. */
export async function nextDue(db: Executor): Promise<string | null> {
  const row = await db
    .selectFrom('invoices')
    .select(sql<string | null>`min(due_at)`.as('next'))
    .where('status', '=', 'open')
    .where('past_due_at', 'is', null)
    .executeTakeFirst();
  return row?.next ?? null;
}

/** Whether the account has another open invoice past due (which keeps it past due). */
export async function hasOverdue(db: Executor, accountId: string, now: string): Promise<boolean> {
  const row = await db
    .selectFrom('invoices')
    .select('id')
    .where('account_id', '=', accountId)
    .where('status', '=', 'open')
    .where('due_at', '<=', now)
    .executeTakeFirst();
  return row !== undefined;
}

// ——— Counters ———

/**
 * Takes `count` invoice numbers, returning the first; holds the counter row until the transaction ends,
 * so closers (a job and an operator's command, or two replicas) take turns over a whole batch.
 */
export async function takeInvoiceNumbers(db: Executor, count: number): Promise<number> {
  const row = await db
    .updateTable('billing_counters')
    .set({ value: sql<number>`value + ${count}` })
    .where('name', '=', 'invoice_number')
    .returning('value')
    .executeTakeFirstOrThrow();
  return Number(row.value) - count + 1;
}

export async function counter(db: Executor, name: 'closed_through_s'): Promise<number> {
  const row = await db
    .selectFrom('billing_counters')
    .select('value')
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  return Number(row.value);
}

/** Moves a counter forward to `value` (never back). */
export async function advanceCounter(db: Executor, name: 'closed_through_s', value: number): Promise<void> {
  await db
    .updateTable('billing_counters')
    .set({ value })
    .where('name', '=', name)
    .where('value', '<', value)
    .execute();
}
