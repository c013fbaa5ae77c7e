/**
 * Data transfer in the store (migration 0022): a collection round's readings become bytes per account,
 * UTC day and instance, exactly once.
 *
 * Exactly once. Each instance's last counted reading (its base) lives in `transfer_counters`, and the
 * bytes a reading adds go into `transfer_day_totals` in the same transaction as the new base. A round
 * that dies before its commit leaves the old base, so the next reading counts those bytes; one that
 * committed moved the base, so nothing is counted again. On PostgreSQL the base rows are locked while
 * read (a second collector, with a lease that lapsed, waits and then reads the moved base).
 *
 * Windows. Bytes are counted on the UTC day of the round that read them; a usage window holds a day's
 * bytes when it holds the day's start (whole months, what invoices and the default usage show, are
 * exact).
 */
import { sql } from 'kysely';
import { isPostgres } from '../../platform/store/dialect.js';
import type { Executor } from '../../platform/store/schema.js';
import type { Window } from './meter-store.js';
import type { UsagePiece } from './rules.js';
import {
  TRANSFER_IN_PRICE_MICROS,
  TRANSFER_OUT_PRICE_MICROS,
  type TransferBase,
  type TransferReading,
  transferDelta,
} from './transfer.js';

const DAY_S = 86_400;

/** The instance a reading is of, as billing names it. */
export interface TransferInstance {
  id: string;
  account_id: string;
  name: string;
  region: string;
}

/** Bytes a round added, for the caller's log and tests. */
export interface RecordedTransfer {
  out: number;
  in: number;
}

/**
 * Counts one round's readings (call inside a transaction): per instance, the bytes since its base, added
 * to the day of `at`, and the reading as its new base.
 */
export async function recordTransfer(
  trx: Executor,
  readings: readonly { instance: TransferInstance; reading: TransferReading }[],
  at: Date,
): Promise<RecordedTransfer> {
  const total = { out: 0, in: 0 };
  if (readings.length === 0) return total;
  const ids = readings.map((r) => r.instance.id);
  const readAt = at.toISOString();
  // An instance read for the first time gets a zero base first (which counts its reading whole, as no
  // base would), so that the rows below exist and are locked: two rounds that overlap (a collector
  // whose lease lapsed) then take turns even on an instance's first reading, instead of both counting it.
  await trx
    .insertInto('transfer_counters')
    .values(ids.map((id) => ({ resource_id: id, bytes_out: 0, bytes_in: 0, epoch: null, read_at: readAt })))
    .onConflict((oc) => oc.column('resource_id').doNothing())
    .execute();
  let query = trx.selectFrom('transfer_counters').selectAll().where('resource_id', 'in', ids);
  if (isPostgres(trx)) query = query.forUpdate();
  const bases = new Map<string, TransferBase>(
    (await query.execute()).map((row) => [
      row.resource_id,
      { bytesOut: Number(row.bytes_out), bytesIn: Number(row.bytes_in), epoch: row.epoch },
    ]),
  );
  const daySecond = Math.floor(at.getTime() / 1000 / DAY_S) * DAY_S;
  for (const { instance, reading } of readings) {
    const delta = transferDelta(bases.get(instance.id) ?? null, reading);
    await trx
      .insertInto('transfer_counters')
      .values({
        resource_id: instance.id,
        bytes_out: delta.base.bytesOut,
        bytes_in: delta.base.bytesIn,
        epoch: delta.base.epoch,
        read_at: readAt,
      })
      .onConflict((oc) =>
        oc.column('resource_id').doUpdateSet({
          bytes_out: delta.base.bytesOut,
          bytes_in: delta.base.bytesIn,
          epoch: delta.base.epoch,
          read_at: readAt,
        }),
      )
      .execute();
    if (delta.out === 0 && delta.in === 0) continue;
    total.out += delta.out;
    total.in += delta.in;
    await trx
      .insertInto('transfer_day_totals')
      .values({
        account_id: instance.account_id,
        day_s: daySecond,
        resource_id: instance.id,
        resource_name: instance.name,
        region: instance.region,
        bytes_out: delta.out,
        bytes_in: delta.in,
      })
      .onConflict((oc) =>
        oc.columns(['account_id', 'day_s', 'resource_id']).doUpdateSet({
          bytes_out: sql`transfer_day_totals.bytes_out + excluded.bytes_out`,
          bytes_in: sql`transfer_day_totals.bytes_in + excluded.bytes_in`,
          resource_name: sql`excluded.resource_name`,
        }),
      )
      .execute();
  }
  return total;
}

/** Forgets an instance's base (it is gone; its counted bytes stay). */
export async function forgetTransferBase(db: Executor, resourceId: string): Promise<void> {
  await db.deleteFrom('transfer_counters').where('resource_id', '=', resourceId).execute();
}

/** The days whose start lies in the window (and not after now). */
function daysOf(db: Executor, window: Window, accountId: string | null) {
  let query = db
    .selectFrom('transfer_day_totals')
    .where('day_s', '>=', window.start)
    .where('day_s', '<', Math.min(window.end, window.now + 1));
  if (accountId !== null) query = query.where('account_id', '=', accountId);
  return query;
}

/** The two pieces of one instance's bytes: sent (billed) and received (free). */
function piecesOf(
  row: { resource_id: string; resource_name: string; bytes_out: number | string; bytes_in: number | string },
  day?: string,
): UsagePiece[] {
  const base = {
    resource_id: row.resource_id,
    resource_type: 'instance' as const,
    resource_name: row.resource_name,
    instance_type: null,
    size_gb: null,
    unit: 'GB' as const,
    seconds: 0,
    ...(day === undefined ? {} : { day }),
  };
  return [
    {
      ...base,
      meter: 'data_transfer',
      unit_price_micros: TRANSFER_OUT_PRICE_MICROS,
      bytes: Number(row.bytes_out),
    },
    {
      ...base,
      meter: 'data_transfer_in',
      unit_price_micros: TRANSFER_IN_PRICE_MICROS,
      bytes: Number(row.bytes_in),
    },
  ];
}

/** Each instance's bytes in the window (accountId null: every account's), as usage pieces. */
export async function transferPieces(
  db: Executor,
  accountId: string | null,
  window: Window,
): Promise<(UsagePiece & { account_id: string })[]> {
  const rows = await daysOf(db, window, accountId)
    .select([
      'account_id',
      'resource_id',
      sql<string>`max(resource_name)`.as('resource_name'),
      sql<number>`sum(bytes_out)`.as('bytes_out'),
      sql<number>`sum(bytes_in)`.as('bytes_in'),
    ])
    .groupBy(['account_id', 'resource_id'])
    .orderBy('account_id')
    .orderBy('resource_id')
    .execute();
  return rows.flatMap((row) => piecesOf(row).map((piece) => ({ ...piece, account_id: row.account_id })));
}

/** An account's bytes in the window per UTC day (all its instances together), for grouping by day. */
export async function transferPiecesByDay(
  db: Executor,
  accountId: string,
  window: Window,
): Promise<UsagePiece[]> {
  const rows = await daysOf(db, window, accountId)
    .select(['day_s', sql<number>`sum(bytes_out)`.as('bytes_out'), sql<number>`sum(bytes_in)`.as('bytes_in')])
    .groupBy('day_s')
    .orderBy('day_s')
    .execute();
  return rows.flatMap((row) =>
    piecesOf(
      { resource_id: '', resource_name: '', bytes_out: row.bytes_out, bytes_in: row.bytes_in },
      new Date(Number(row.day_s) * 1000).toISOString().slice(0, 10),
    ),
  );
}

/** Whether the account counted any bytes in the window (usage pages then add its transfer lines). */
export async function hasTransfer(db: Executor, accountId: string, window: Window): Promise<boolean> {
  const row = await daysOf(db, window, accountId).select('resource_id').limit(1).executeTakeFirst();
  return row !== undefined;
}
