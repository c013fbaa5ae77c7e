/**
 * Billing: usage as it stands, invoices per month, the operator's pay and void, and past-due accounts.
 *
 * Where the figures come from. Every billable state change writes the resource's metered interval in its
 * own transaction (the lifecycle core, resources/billing/meter-store.ts). Usage sums the seconds of those intervals
 * inside a window — intervals still open end at now — and turns them into money exactly
 * (resources/billing/rules.ts). Nothing is kept in memory, so a restart or a kill -9 changes no figure.
 *
 * Closing a period. One durable job (`billing:periods`) runs at each month's end and whenever an open
 * invoice falls due. It closes every month that has ended and is not closed yet: per batch of accounts, in
 * one transaction, it fixes each account's lines and totals, gives the invoice its number and opens it
 * (`invoice.created`). An account has one invoice per month (a unique key), and a closer skips accounts
 * whose invoice is no longer a draft, so closing twice — the job and an operator's `admin close-period`,
 * or a run cut short and run again — makes one invoice. Then it marks open invoices past `due_at` and
 * their accounts past due (`invoice.past_due`); paying or voiding the last such invoice makes the account
 * active again.
 */

import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import {
  type Page,
  type PageRequest,
  type Pagination,
  pagination,
} from '../../platform/domain/pagination.js';
import { Conflict, InvalidRequest, NotFound } from '../../platform/errors.js';
import { recordEvent } from '../../platform/events/outbox.js';
import type { JobHandler, JobRunner } from '../../platform/jobs/runner.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import type { ApiKeyService } from '../account/api-key-service.js';
import { findAccount, updateAccount } from '../account/store.js';
import { invoiceCsv, usageCsv } from './csv.js';
import {
  INVOICE_ACTIONS,
  type Invoice,
  type InvoiceAction,
  type InvoiceLine,
  type InvoiceStatus,
} from './invoice-rules.js';
import * as invoices from './invoice-store.js';
import {
  firstMeteredSecond,
  intervalsWithin,
  usageLinesPage,
  usagePieces,
  usagePiecesOfAll,
  type Window,
} from './meter-store.js';
import { invoicePdf } from './pdf.js';
import {
  accrue,
  epochSecond,
  type GroupBy,
  groupUsage,
  type LineItem,
  monthOf,
  type Period,
  periodNamed,
  secondsPerDay,
  sumAmounts,
  totalCents,
  type UsagePiece,
} from './rules.js';
import { hasTransfer, transferPieces, transferPiecesByDay } from './transfer-store.js';
import { invoiceView, usageView } from './view.js';

export const BILLING_JOB = { kind: 'billing', subject: 'periods' } as const;

/** Accounts closed per transaction (one commit each). */
const CLOSE_BATCH = 500;
/** Usage windows longer than this are refused (a year and a day). */
const MAX_WINDOW_MS = 366 * 86_400_000;

export interface BillingOptions {
  /** Days from issue to due (NIMBUS_INVOICE_DUE_DAYS). */
  dueDays: number;
}

export interface UsageQuery {
  start?: string | undefined;
  end?: string | undefined;
  group_by?: GroupBy | undefined;
}

/** A page of usage lines: `page` from 1, `limit` lines a page. */
export interface UsagePaging {
  page: number;
  limit: number;
}

/** Lines a usage page holds by default and at most; an account with fewer lines gets them all at once. */
export const USAGE_PAGE_SIZE = 1000;

export interface Usage {
  start: Date;
  end: Date;
  asOf: Date;
  groupBy: GroupBy;
  /** All the lines, or the page's. */
  lines: LineItem[];
  /** The whole window's, whatever the page. */
  subtotal: bigint;
  /** Set when the lines were asked for a page at a time. */
  pagination?: Pagination;
}

/** An invoice with its lines (a draft's computed now). */
export interface InvoiceWithLines {
  invoice: Invoice;
  lines: InvoiceLine[];
}

/** A file to download: its bytes, media type and the name a browser saves it under. */
export interface Download {
  body: Buffer | string;
  contentType: string;
  filename: string;
}

export interface CloseResult {
  /** `YYYY-MM` of each month closed by this call. */
  periods: string[];
  invoices_opened: number;
}

export class BillingService implements JobHandler {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly jobs: JobRunner,
    private readonly apiKeys: ApiKeyService,
    private readonly options: BillingOptions,
  ) {}

  /** The service's clock (an operator's `close-period` without `--at` closes as of it). */
  now(): Date {
    return this.clock.now();
  }

  /** Makes sure the period job exists (server start): it runs now, then asks for its own next time. */
  async start(): Promise<void> {
    await this.jobs.enqueue(this.store.db, BILLING_JOB.kind, BILLING_JOB.subject);
    this.jobs.wake();
  }

  // ——— Usage ———

  /**
   * Usage in a window. With `paging`, the lines of one page (the subtotal still the whole window's): by
   * resource over whole months — the default, and the answer that grows with the account — the database
   * groups, orders and sums, so a page costs about the same however many lines there are; other groupings
   * have a few lines per day at most and are cut into pages here.
   */
  async usage(accountId: string, query: UsageQuery, paging?: UsagePaging): Promise<Usage> {
    const now = this.clock.now();
    const start = query.start ? instant('start', query.start) : monthOf(now).start;
    const end = query.end ? instant('end', query.end) : now;
    if (end.getTime() <= start.getTime()) {
      throw new InvalidRequest('end must be after start', {
        field: 'end',
        value: query.end ?? end.toISOString(),
      });
    }
    if (end.getTime() - start.getTime() > MAX_WINDOW_MS) {
      throw new InvalidRequest('A usage window spans at most 366 days', {
        field: 'end',
        value: end.toISOString(),
      });
    }
    const groupBy = query.group_by ?? 'resource';
    const usage = { start, end, asOf: now, groupBy };
    const window = windowOf({ start, end }, now);
    // Data transfer lines are not among what the database pages (they are bytes, not intervals): an
    // account that has some is paged here, from all its lines.
    if (paging && groupBy === 'resource' && !(await hasTransfer(this.store.db, accountId, window))) {
      const offset = (paging.page - 1) * paging.limit;
      const page = await usageLinesPage(this.store.db, accountId, window, { offset, limit: paging.limit });
      if (page) {
        let subtotal = 0n;
        for (const price of page.byPrice) subtotal += accrue(price, price.seconds);
        return {
          ...usage,
          lines: groupUsage(page.pieces, 'resource'),
          subtotal,
          pagination: pagination(paging.page, paging.limit, page.lineCount),
        };
      }
    }
    const lines = await this.linesWithin(accountId, { start, end }, now, groupBy);
    const subtotal = sumAmounts(lines);
    if (!paging) return { ...usage, lines, subtotal };
    const offset = (paging.page - 1) * paging.limit;
    return {
      ...usage,
      lines: lines.slice(offset, offset + paging.limit),
      subtotal,
      pagination: pagination(paging.page, paging.limit, lines.length),
    };
  }

  private async linesWithin(
    accountId: string,
    period: Period,
    now: Date,
    groupBy: GroupBy,
  ): Promise<LineItem[]> {
    const window = windowOf(period, now);
    if (groupBy !== 'day') {
      const [metered, transferred] = await Promise.all([
        usagePieces(this.store.db, accountId, window),
        transferPieces(this.store.db, accountId, window),
      ]);
      return groupUsage([...metered, ...transferred], groupBy);
    }
    // Per day, what costs the same per second is added up first (a price is its unit, micro-USD and GB),
    // so the lines are made from a few pieces a day however many intervals there are; exact all the same.
    const byDay = new Map<string, UsagePiece>();
    for (const span of await intervalsWithin(this.store.db, accountId, window)) {
      for (const { day, seconds } of secondsPerDay(span.startS * 1000, span.endS * 1000)) {
        const key = `${day}|${span.resource_type}|${span.meter}|${span.unit}|${span.unit_price_micros}|${span.size_gb}`;
        const piece = byDay.get(key);
        if (piece) {
          piece.seconds += seconds;
          continue;
        }
        byDay.set(key, {
          resource_id: '',
          resource_type: span.resource_type,
          resource_name: '',
          meter: span.meter,
          instance_type: null,
          size_gb: span.size_gb,
          unit: span.unit,
          unit_price_micros: span.unit_price_micros,
          seconds,
          day,
        });
      }
    }
    // Days in order, then what the resource types and meters are within each.
    const pieces = [...byDay.values(), ...(await transferPiecesByDay(this.store.db, accountId, window))].sort(
      (a, b) => (a.day! < b.day! ? -1 : a.day! > b.day! ? 1 : 0),
    );
    return groupUsage(pieces, 'day');
  }

  // ——— Invoices ———

  async listInvoices(
    accountId: string,
    filter: { status?: InvoiceStatus | undefined; period?: string | undefined },
    request: PageRequest,
  ): Promise<Page<Invoice>> {
    await this.ensureDraft(accountId);
    const page = await invoices.listInvoices(
      this.store.db,
      accountId,
      {
        status: filter.status,
        periodStart: filter.period ? periodNamed(filter.period).start.toISOString() : undefined,
      },
      request,
    );
    const items = await Promise.all(
      page.items.map(async (invoice) => (await this.withLines(invoice)).invoice),
    );
    return { items, pagination: page.pagination };
  }

  async getInvoice(accountId: string, id: string): Promise<InvoiceWithLines> {
    await this.ensureDraft(accountId);
    const invoice = await invoices.findAccountInvoice(this.store.db, accountId, id);
    if (!invoice) throw new NotFound('invoice', id);
    return this.withLines(invoice);
  }

  async invoicePdf(accountId: string, id: string): Promise<Download> {
    const view = invoiceView(await this.getInvoice(accountId, id));
    const account = await findAccount(this.store.db, accountId);
    const buyer = {
      name: account?.company ?? account?.name ?? accountId,
      lines: [
        ...(account?.company && account.name ? [account.name] : []),
        account?.billing_email ?? account?.email ?? '',
        `Account ${accountId}`,
      ].filter((line) => line.length > 0),
    };
    return {
      body: await invoicePdf(view, buyer),
      contentType: 'application/pdf',
      filename: `${invoiceFileName(view)}.pdf`,
    };
  }

  async invoiceCsv(accountId: string, id: string): Promise<Download> {
    const view = invoiceView(await this.getInvoice(accountId, id));
    return {
      body: invoiceCsv(view),
      contentType: 'text/csv; charset=utf-8',
      filename: `${invoiceFileName(view)}.csv`,
    };
  }

  async usageCsv(accountId: string, query: UsageQuery): Promise<Download> {
    const view = usageView(await this.usage(accountId, query));
    return {
      body: usageCsv(view),
      contentType: 'text/csv; charset=utf-8',
      filename: `nimbus-usage-${view.start.slice(0, 10)}-${view.end.slice(0, 10)}.csv`,
    };
  }

  /** A draft's lines and totals as of now; an issued invoice's as fixed when it opened. */
  private async withLines(invoice: Invoice): Promise<InvoiceWithLines> {
    if (invoice.status !== 'draft')
      return { invoice, lines: await invoices.linesOf(this.store.db, invoice.id) };
    const period = { start: new Date(invoice.period_start), end: new Date(invoice.period_end) };
    const lines = await this.linesWithin(invoice.account_id, period, this.clock.now(), 'resource');
    const subtotal = sumAmounts(lines);
    return {
      invoice: { ...invoice, subtotal, total_cents: totalCents(subtotal) },
      lines: lines.map(invoiceLine),
    };
  }

  /** The running month's draft exists from the first time the account looks at its invoices. */
  private async ensureDraft(accountId: string): Promise<void> {
    const now = this.clock.now();
    const period = monthOf(now);
    await invoices.insertInvoiceIfAbsent(this.store.db, {
      id: newId('invoice', now),
      account_id: accountId,
      number: null,
      status: 'draft',
      period_start: period.start.toISOString(),
      period_end: period.end.toISOString(),
      subtotal: 0n,
      total_cents: 0n,
      issued_at: null,
      due_at: null,
      past_due_at: null,
      paid_at: null,
      voided_at: null,
      version: 1,
      created_at: now.toISOString(),
      updated_at: now.toISOString(),
    });
  }

  // ——— Closing periods ———

  /** The period job: close what has ended, mark what is overdue, come back at the next of either. */
  async run(): Promise<Date | null> {
    const now = this.clock.now();
    await this.closePeriods(now);
    await this.markPastDue(now);
    const nextMonth = monthOf(now).end;
    const due = await invoices.nextDue(this.store.db);
    return due !== null && new Date(due) < nextMonth ? new Date(due) : nextMonth;
  }

  async giveUp(): Promise<void> {
    // The job is enqueued again at once: the next month's end must not be missed for a passing failure.
    await this.start();
  }

  /**
   * Closes every calendar month that ended by `at` and is not closed yet; safe to run any number of times.
   * `at` cannot be later than now: a month closed before it ends would bill what is still running as if it
   * ran to the month's end, and nothing after the close could change that invoice any more.
   */
  async closePeriods(at: Date): Promise<CloseResult> {
    const now = this.clock.now();
    if (at.getTime() > now.getTime()) {
      throw new InvalidRequest(
        `Cannot close periods as of ${at.toISOString()}: that is later than now (${now.toISOString()}), ` +
          'and a month is closed only once it has ended',
        { field: 'at', value: at.toISOString() },
      );
    }
    const result: CloseResult = { periods: [], invoices_opened: 0 };
    const closedThrough = await invoices.counter(this.store.db, 'closed_through_s');
    const first = closedThrough > 0 ? closedThrough : await firstMeteredSecond(this.store.db);
    if (first === null) return result;
    let period = monthOf(new Date(first * 1000));
    while (period.end.getTime() <= at.getTime()) {
      result.invoices_opened += await this.closePeriod(period, at);
      await invoices.advanceCounter(this.store.db, 'closed_through_s', epochSecond(period.end.getTime()));
      result.periods.push(period.start.toISOString().slice(0, 7));
      period = monthOf(period.end);
    }
    if (result.invoices_opened > 0) {
      // The period job looks again now: its next run is when the first of these falls due.
      await this.start();
    }
    return result;
  }

  /** Opens the invoice of every account that used something in `period` (or holds its draft). */
  private async closePeriod(period: Period, issuedAt: Date): Promise<number> {
    const window = windowOf(period, period.end);
    const pieces = [
      ...(await usagePiecesOfAll(this.store.db, window)),
      ...(await transferPieces(this.store.db, null, window)),
    ];
    const byAccount = new Map<string, UsagePiece[]>();
    for (const piece of pieces) {
      const list = byAccount.get(piece.account_id) ?? [];
      list.push(piece);
      byAccount.set(piece.account_id, list);
    }
    const periodStart = period.start.toISOString();
    for (const accountId of await invoices.accountsWithDraft(this.store.db, periodStart)) {
      if (!byAccount.has(accountId)) byAccount.set(accountId, []);
    }
    const accounts = [...byAccount.keys()];
    let opened = 0;
    for (let from = 0; from < accounts.length; from += CLOSE_BATCH) {
      const batch = accounts.slice(from, from + CLOSE_BATCH);
      opened += await this.store.db.transaction().execute(async (trx) => {
        // Taking zero numbers still holds the counter row: closers take turns over a batch.
        await invoices.takeInvoiceNumbers(trx, 0);
        const existing = new Map(
          (await invoices.invoicesOfPeriod(trx, periodStart, batch)).map((invoice) => [
            invoice.account_id,
            invoice,
          ]),
        );
        const toOpen: { accountId: string; lines: LineItem[]; draft: Invoice | undefined }[] = [];
        for (const accountId of batch) {
          const draft = existing.get(accountId);
          if (draft && draft.status !== 'draft') continue; // closed before: idempotent
          const lines = groupUsage(byAccount.get(accountId) ?? [], 'resource');
          if (lines.length === 0) {
            // Nothing used: no invoice (a draft has no number yet, so none is lost).
            if (draft) await invoices.deleteDraft(trx, draft);
            continue;
          }
          toOpen.push({ accountId, lines, draft });
        }
        if (toOpen.length === 0) return 0;
        let number = await invoices.takeInvoiceNumbers(trx, toOpen.length);
        for (const { accountId, lines, draft } of toOpen) {
          await this.open(trx, accountId, period, lines, number++, issuedAt, draft);
        }
        return toOpen.length;
      });
    }
    return opened;
  }

  private async open(
    trx: Executor,
    accountId: string,
    period: Period,
    lines: LineItem[],
    number: number,
    issuedAt: Date,
    draft: Invoice | undefined,
  ): Promise<void> {
    const subtotal = sumAmounts(lines);
    const at = issuedAt.toISOString();
    const fixed = {
      number,
      status: 'open' as const,
      subtotal,
      total_cents: totalCents(subtotal),
      issued_at: at,
      due_at: new Date(issuedAt.getTime() + this.options.dueDays * 86_400_000).toISOString(),
      updated_at: at,
    };
    let id: string;
    if (draft) {
      const written = await invoices.updateInvoice(trx, draft, fixed);
      if (!written) throw new Conflict(`Invoice ${draft.id} changed while its period closed`);
      id = draft.id;
    } else {
      id = newId('invoice', issuedAt);
      await invoices.insertInvoice(trx, {
        id,
        account_id: accountId,
        period_start: period.start.toISOString(),
        period_end: period.end.toISOString(),
        past_due_at: null,
        paid_at: null,
        voided_at: null,
        version: 1,
        created_at: at,
        ...fixed,
      });
    }
    await invoices.insertLines(trx, id, lines.map(invoiceLine));
    await recordEvent(trx, this.clock, {
      accountId,
      type: 'invoice.created',
      resourceId: id,
      data: { invoice_id: id, status: 'open' },
    });
  }

  // ——— Past due, pay, void ———

  /** Marks open invoices past due and their (active) accounts past due; returns how many. */
  async markPastDue(now: Date): Promise<number> {
    let marked = 0;
    for (;;) {
      const overdue = await invoices.newlyOverdue(this.store.db, now.toISOString(), 100);
      if (overdue.length === 0) return marked;
      for (const invoice of overdue) {
        const changed = await this.store.db.transaction().execute(async (trx) => {
          const current = await invoices.lockInvoice(trx, invoice.id);
          if (current?.status !== 'open' || current.past_due_at !== null) return false;
          await invoices.updateInvoice(trx, current, {
            past_due_at: now.toISOString(),
            updated_at: now.toISOString(),
          });
          const account = await findAccount(trx, current.account_id);
          // A suspended account stays suspended; past_due never overrides an operator's stronger status.
          if (account?.status === 'active') {
            await updateAccount(trx, current.account_id, {
              status: 'past_due',
              updated_at: now.toISOString(),
            });
          }
          await recordEvent(trx, this.clock, {
            accountId: current.account_id,
            type: 'invoice.past_due',
            resourceId: current.id,
            data: { invoice_id: current.id, status: 'open' },
          });
          return true;
        });
        if (changed) {
          marked += 1;
          await this.apiKeys.forgetAccount(invoice.account_id);
        }
      }
    }
  }

  /** An operator's `admin invoice-pay` / `invoice-void`: open → paid | void. */
  async settle(invoiceId: string, action: InvoiceAction): Promise<Invoice> {
    const now = this.clock.now();
    const at = now.toISOString();
    const { invoice, reactivated } = await this.store.db.transaction().execute(async (trx) => {
      const current = await invoices.lockInvoice(trx, invoiceId);
      if (!current) throw new NotFound('invoice', invoiceId);
      const rule = INVOICE_ACTIONS[action];
      if (!(rule.from as readonly string[]).includes(current.status)) {
        throw new Conflict(
          `Cannot ${action} an invoice that is ${current.status}; allowed from: ${rule.from.join(', ')}`,
          { current_status: current.status, allowed_statuses: [...rule.from] },
        );
      }
      const written = await invoices.updateInvoice(trx, current, {
        status: rule.to,
        ...(action === 'pay' ? { paid_at: at } : { voided_at: at }),
        updated_at: at,
      });
      if (!written) throw new Conflict(`Invoice ${invoiceId} changed meanwhile; try again`);
      if (action === 'pay') {
        await recordEvent(trx, this.clock, {
          accountId: current.account_id,
          type: 'invoice.paid',
          resourceId: current.id,
          data: { invoice_id: current.id, status: 'paid' },
        });
      }
      // The account is past due for its overdue invoices only: once none is left, it is active again.
      const account = await findAccount(trx, current.account_id);
      let reactivated = false;
      if (account?.status === 'past_due' && !(await invoices.hasOverdue(trx, current.account_id, at))) {
        await updateAccount(trx, current.account_id, { status: 'active', updated_at: at });
        reactivated = true;
      }
      return { invoice: written, reactivated };
    });
    if (reactivated) await this.apiKeys.forgetAccount(invoice.account_id);
    return invoice;
  }

  /** An invoice by id for an operator (any account), with its lines. */
  async invoiceForOperator(id: string): Promise<InvoiceWithLines> {
    const invoice = await invoices.findInvoice(this.store.db, id);
    if (!invoice) throw new NotFound('invoice', id);
    return this.withLines(invoice);
  }
}

const invoiceLine = (line: LineItem): InvoiceLine => ({
  resource_id: line.resource_id,
  resource_type: line.resource_type,
  meter: line.meter,
  description: line.description,
  instance_type: line.instance_type,
  unit: line.unit,
  quantity_numerator: line.quantity_numerator,
  unit_price_micros: line.unit_price_micros,
  amount: line.amount,
});

const invoiceFileName = (view: { number: string | null; period: string; id: string }) =>
  `nimbus-invoice-${view.number ?? `draft-${view.period}`}`;

function windowOf(period: Period, now: Date): Window {
  return {
    start: epochSecond(period.start.getTime()),
    end: epochSecond(period.end.getTime()),
    now: epochSecond(now.getTime()),
  };
}

function instant(field: string, text: string): Date {
  const at = new Date(text);
  if (Number.isNaN(at.getTime())) {
    throw new InvalidRequest(`${field} must be an ISO 8601 date-time`, { field, value: text });
  }
  return at;
}
