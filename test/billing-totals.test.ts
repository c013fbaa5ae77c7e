/**
 * The month totals against the intervals they add up, on both stores (a real SQLite file, a real
 * PostgreSQL database): random histories of price changes — resources switching between prices, pausing,
 * ending, some still paying at the end, intervals of less than a second, across month ends — written
 * with the very function the lifecycle core calls (switchMeter), then every whole-month window (closed
 * months, the current month up to now, several months at once, one account or all of them) read from the
 * totals and from the intervals: the seconds of every resource and price agree, always.
 *
 * Also the migration's backfill: intervals written before the totals existed are added up by it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest, openStore, type Store } from '../src/platform/store/db.js';
import {
  switchMeter,
  usageLinesPage,
  usagePieces,
  usagePiecesFromIntervals,
  usagePiecesOfAll,
  type Window,
} from '../src/resources/billing/meter-store.js';
import { up as totalsMigration } from '../src/resources/billing/migrations/0012_billing_totals.js';
import { up as linesMigration } from '../src/resources/billing/migrations/0023_billing_lines.js';
import {
  accrue,
  groupUsage,
  type LineItem,
  type Meter,
  monthOf,
  sumAmounts,
  type UsagePiece,
} from '../src/resources/billing/rules.js';
import { MIGRATIONS } from '../src/resources.js';
import { createPostgresDatabase, STORES } from './helpers/backends.js';

const T0 = Date.parse('2026-01-20T00:00:00Z');
const DAY = 86_400_000;

/** The prices a resource may switch between (an instance's compute and disk of two types, a volume). */
const PRICES = [
  {
    meter: 'instance_compute',
    unit: 'hour',
    instance_type: 'compute-2x',
    size_gb: null,
    unit_price_micros: 100_000,
  },
  {
    meter: 'instance_compute',
    unit: 'hour',
    instance_type: 'compute-4x',
    size_gb: null,
    unit_price_micros: 200_000,
  },
  {
    meter: 'instance_storage',
    unit: 'GB-month',
    instance_type: 'compute-2x',
    size_gb: 50,
    unit_price_micros: 100_000,
  },
  {
    meter: 'volume_storage',
    unit: 'GB-month',
    instance_type: null,
    size_gb: 100,
    unit_price_micros: 100_000,
  },
] as const;

/** One change: after `gapMs`, the resource pays PRICES[price], or nothing (null). */
const change = fc.record({
  gapMs: fc.oneof(fc.integer({ min: 0, max: 1500 }), fc.integer({ min: 1000, max: 25 * DAY })),
  price: fc.option(fc.integer({ min: 0, max: PRICES.length - 1 }), { nil: null, freq: 4 }),
});
const history = fc.record({
  account: fc.integer({ min: 0, max: 2 }),
  startMs: fc.integer({ min: 0, max: 40 * DAY }),
  changes: fc.array(change, { minLength: 1, maxLength: 12 }),
});

type Piece = {
  account_id: string;
  resource_id: string;
  meter: string;
  instance_type: string | null;
  size_gb: number | null;
  unit_price_micros: number;
  seconds: number;
};
const keyed = (pieces: Piece[]) =>
  pieces
    .filter((p) => p.seconds > 0)
    .map(
      (p) =>
        `${p.account_id} ${p.resource_id} ${p.meter} ${p.instance_type} ${p.size_gb} ${p.unit_price_micros} ${p.seconds}`,
    )
    .sort();

/** Every window the totals answer for, up to `nowMs`: each month, the current one to now, all of them. */
function windows(nowMs: number): Window[] {
  const now = Math.floor(nowMs / 1000);
  const out: Window[] = [];
  const first = monthOf(new Date(T0)).start.getTime() / 1000;
  for (let month = monthOf(new Date(T0)); month.start.getTime() <= nowMs; month = monthOf(month.end)) {
    const start = month.start.getTime() / 1000;
    const end = month.end.getTime() / 1000;
    out.push({ start, end, now: Math.max(now, 0) });
    out.push({ start: first, end, now });
  }
  out.push({ start: first, end: now, now });
  return out;
}

/**
 * The database's pages of usage lines by resource (usageLinesPage: one month read as ranges, several
 * merged in SQL) against the lines grouped from the intervals: the same lines in the same order, page by
 * page (pages of two and one page of all), the same count and the same exact total.
 */
async function expectPagesAgree(
  db: Store['db'],
  account: string,
  window: Window,
  fromIntervals: UsagePiece[],
): Promise<void> {
  const expected = groupUsage(fromIntervals, 'resource');
  // Not the description: which of a resource's names the intervals' sum shows is arbitrary (max).
  const line = (l: LineItem) =>
    `${l.resource_id} ${l.meter} ${l.instance_type} ${l.unit_price_micros} ${l.quantity_numerator} ${l.amount}`;
  const whole = await usageLinesPage(db, account, window, { offset: 0, limit: 1000 });
  if (whole === null) return; // not a window of whole months
  const context = JSON.stringify({ account, window });
  expect(whole.lineCount, context).toBe(expected.length);
  let total = 0n;
  for (const price of whole.byPrice) total += accrue(price, price.seconds);
  expect(total, context).toBe(sumAmounts(expected));
  // Each piece is one line, in the order lines are shown (not sorted again here). The order is checked
  // down to the resource and meter: between two prices of one resource and meter, the totals know the
  // first interval that lasted a second or more (as before migration 0023), the intervals every one.
  const lines = (pieces: UsagePiece[]) => pieces.map((piece) => line(groupUsage([piece], 'resource')[0]!));
  const order = (texts: string[]) => texts.map((text) => text.split(' ').slice(0, 2).join(' '));
  const expectSameLines = (actual: string[]) => {
    expect(order(actual), context).toEqual(order(expected.map(line)));
    expect([...actual].sort(), context).toEqual(expected.map(line).sort());
  };
  expectSameLines(lines(whole.pieces));
  const paged: string[] = [];
  for (let offset = 0; offset < expected.length; offset += 2) {
    const page = await usageLinesPage(db, account, window, { offset, limit: 2 });
    paged.push(...lines(page?.pieces ?? []));
  }
  expectSameLines(paged);
}

describe.each(STORES)('billing month totals (%s)', (store) => {
  let opened: Store;
  let drop: (() => Promise<void>) | undefined;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-billing-totals-'));
  let run = 0;

  beforeAll(async () => {
    let databaseUrl: string | undefined;
    if (store === 'postgres') ({ url: databaseUrl, drop } = await createPostgresDatabase());
    opened = openStore({ dataDir, ...(databaseUrl ? { databaseUrl } : {}) });
    await migrateToLatest(opened.db, MIGRATIONS);
  });
  afterAll(async () => {
    await opened?.close();
    await drop?.();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('agree with the intervals for every whole-month window', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(history, { minLength: 1, maxLength: 6 }), async (histories) => {
        run += 1;
        const accounts = [0, 1, 2].map((n) => `acct_run${run}_${n}`);
        // Every change of every resource, in time order (as the lifecycle core writes them).
        // `isNew`: a resource's first change is its create (its interval marks no row of the totals).
        const writes: {
          at: number;
          resource: string;
          account: string;
          meter: Meter | null;
          isNew: boolean;
        }[] = [];
        let lastMs = T0;
        histories.forEach((h, index) => {
          let at = T0 + h.startMs;
          const resource = `res_run${run}_${index}`;
          h.changes.forEach((c, n) => {
            at += c.gapMs;
            const price = c.price === null ? null : PRICES[c.price]!;
            writes.push({
              at,
              isNew: n === 0,
              resource,
              account: accounts[h.account]!,
              meter:
                price === null
                  ? null
                  : {
                      ...price,
                      account_id: accounts[h.account]!,
                      resource_id: resource,
                      resource_type: price.meter === 'volume_storage' ? 'volume' : 'instance',
                      resource_name: `${resource}-${c.gapMs}`,
                      region: 'us-east-1',
                    },
            });
            lastMs = Math.max(lastMs, at);
          });
        });
        writes.sort((a, b) => a.at - b.at);
        for (const write of writes) {
          await opened.db
            .transaction()
            .execute((trx) => switchMeter(trx, write.resource, write.meter, new Date(write.at), write.isNew));
        }
        const nowMs = lastMs + 1234;
        for (const window of windows(nowMs)) {
          for (const account of accounts) {
            const fromTotals = (await usagePieces(opened.db, account, window)).map((p) => ({
              ...p,
              account_id: account,
            }));
            const fromIntervals = await usagePiecesFromIntervals(opened.db, account, window);
            expect(keyed(fromTotals), JSON.stringify(window)).toEqual(keyed(fromIntervals));
            await expectPagesAgree(opened.db, account, window, fromIntervals);
          }
          const all = (await usagePiecesOfAll(opened.db, window)).filter((p) =>
            accounts.includes(p.account_id),
          );
          const allIntervals = (await usagePiecesFromIntervals(opened.db, null, window)).filter((p) =>
            accounts.includes(p.account_id),
          );
          expect(keyed(all)).toEqual(keyed(allIntervals));
        }
      }),
      { numRuns: store === 'postgres' ? 25 : 40 },
    );
  }, 300_000);

  it('the migration adds up the intervals closed before it, and only those', async () => {
    const db = opened.db;
    const closedBefore = await db
      .selectFrom('meter_month_totals')
      .select(sql<number>`count(*)`.as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(closedBefore.n)).toBeGreaterThan(0);
    // What the totals hold now, then the same rebuilt from the intervals by the migration's backfill.
    const now = await db
      .selectFrom('meter_month_totals')
      .selectAll()
      .orderBy('month_s')
      .orderBy('account_id')
      .orderBy('resource_id')
      .orderBy('price_key')
      .execute();
    await db.schema.dropIndex('meter_segments_open_lines').execute();
    await db.schema.alterTable('meter_segments').dropColumn('month_marked').execute();
    await db.schema.dropIndex('meter_segments_open').execute();
    await db.schema.dropTable('meter_month_totals').execute();
    await totalsMigration(db);
    await linesMigration(db);
    const rebuilt = await db
      .selectFrom('meter_month_totals')
      .selectAll()
      .orderBy('month_s')
      .orderBy('account_id')
      .orderBy('resource_id')
      .orderBy('price_key')
      .execute();
    // The closed seconds (rows that hold none only stand for an open interval, or one under a second).
    const comparable = (rows: typeof now) =>
      rows
        .filter((row) => Number(row.seconds) > 0)
        .map(({ resource_name: _name, first_seq: _seq, open_start_s: _open, ...rest }) => ({
          ...rest,
          month_s: Number(rest.month_s),
          seconds: Number(rest.seconds),
        }));
    expect(comparable(rebuilt)).toEqual(comparable(now));
    // Migration 0023 marks, for every interval still open, the row of the month it began in.
    const open = await db.selectFrom('meter_segments').selectAll().where('end_s', 'is', null).execute();
    expect(open.length).toBeGreaterThan(0);
    const marks = new Set(
      rebuilt
        .filter((row) => row.open_start_s !== null)
        .map((row) => `${row.resource_id} ${Number(row.open_start_s)} ${Number(row.month_s)}`),
    );
    for (const interval of open) {
      const month = monthOf(new Date(Number(interval.start_s) * 1000)).start.getTime() / 1000;
      expect(marks.has(`${interval.resource_id} ${Number(interval.start_s)} ${month}`)).toBe(true);
      expect(Number(interval.month_marked)).toBe(1);
    }
    expect(marks.size).toBe(open.length);
  }, 120_000);
});
