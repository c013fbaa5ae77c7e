/**
 * Repository of metric blocks (migration 0008): the encoded blocks of resources/metrics/blocks.ts, one row
 * per instance per resolution per window. It stores bytes and knows nothing of their format.
 */
import { CompiledQuery, type Insertable, type Selectable, sql } from 'kysely';
import { isPostgres } from '../../platform/store/dialect.js';
import type { Executor, MetricBlocksTable } from '../../platform/store/schema.js';

type NewMetricBlockRow = Insertable<MetricBlocksTable>;

export type ResolutionName = 'raw' | 'rollup';

export interface StoredBlock {
  instance_id: string;
  resolution: ResolutionName;
  /** ISO 8601 UTC. */
  block_start: string;
  account_id: string;
  sealed: boolean;
  points: number;
  data: Uint8Array;
}

/** Rows per insert statement: 8 parameters a row stays well inside both engines' parameter limits. */
const UPSERT_CHUNK = 400;

/**
 * The upsert's SQL for a number of rows, per engine: made once with the query builder, then run with
 * the values alone. The collector writes every monitored instance's block every 10 s, and building and
 * compiling a 400-row insert through the builder cost more CPU than SQLite took to write it.
 */
const upsertSql = new Map<string, string>();

function upsertSqlFor(db: Executor, rows: number): string {
  const key = `${isPostgres(db) ? 'postgres' : 'sqlite'}:${rows}`;
  let text = upsertSql.get(key);
  if (text === undefined) {
    const row: NewMetricBlockRow = {
      instance_id: '',
      resolution: 'raw',
      block_start: '',
      account_id: '',
      sealed: 0,
      points: 0,
      data: Buffer.alloc(0),
      updated_at: '',
    };
    text = db
      .insertInto('metric_blocks')
      .values(Array.from({ length: rows }, () => row))
      .onConflict((conflict) =>
        conflict.columns(['instance_id', 'resolution', 'block_start']).doUpdateSet({
          data: sql`excluded.data`,
          points: sql`excluded.points`,
          sealed: sql`excluded.sealed`,
          updated_at: sql`excluded.updated_at`,
        }),
      )
      .compile().sql;
    upsertSql.set(key, text);
  }
  return text;
}

/** Writes the blocks (a new row, or the row's data, points and sealed replaced), 400 a statement. */
export async function upsertBlocks(db: Executor, blocks: readonly StoredBlock[], at: string): Promise<void> {
  for (let i = 0; i < blocks.length; i += UPSERT_CHUNK) {
    const chunk = blocks.slice(i, i + UPSERT_CHUNK);
    // In the order of the columns of upsertSqlFor's row.
    const values: unknown[] = [];
    for (const block of chunk) {
      values.push(
        block.instance_id,
        block.resolution,
        block.block_start,
        block.account_id,
        block.sealed ? 1 : 0,
        block.points,
        block.data,
        at,
      );
    }
    await db.executeQuery(CompiledQuery.raw(upsertSqlFor(db, chunk.length), values));
  }
}

function decoded(row: Omit<Selectable<MetricBlocksTable>, 'updated_at'>): StoredBlock {
  return { ...row, resolution: row.resolution as ResolutionName, sealed: row.sealed === 1 };
}

/**
 * The instance's blocks of one resolution whose window starts in [fromStart, toStart], oldest first;
 * with `unsealedOnly`, only the raw blocks not sealed yet (the hours not rolled up).
 */
export async function blocksBetween(
  db: Executor,
  instanceId: string,
  resolution: ResolutionName,
  fromStart: string,
  toStart: string,
  options: { unsealedOnly?: boolean } = {},
): Promise<StoredBlock[]> {
  let query = db
    .selectFrom('metric_blocks')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('resolution', '=', resolution)
    .where('block_start', '>=', fromStart)
    .where('block_start', '<=', toStart);
  if (options.unsealedOnly) query = query.where('sealed', '=', 0);
  const rows = await query.orderBy('block_start').execute();
  return rows.map(decoded);
}

/** The blocks of these instances starting at exactly `blockStart` (the collector's open hour). */
export async function blocksAt(
  db: Executor,
  instanceIds: readonly string[],
  resolution: ResolutionName,
  blockStart: string,
): Promise<StoredBlock[]> {
  const found: StoredBlock[] = [];
  for (let i = 0; i < instanceIds.length; i += UPSERT_CHUNK) {
    const rows = await db
      .selectFrom('metric_blocks')
      .selectAll()
      .where('instance_id', 'in', instanceIds.slice(i, i + UPSERT_CHUNK))
      .where('resolution', '=', resolution)
      .where('block_start', '=', blockStart)
      .execute();
    found.push(...rows.map(decoded));
  }
  return found;
}

/** Raw blocks of hours before `before` that are not sealed yet, oldest first. */
export async function unsealedBefore(db: Executor, before: string, limit: number): Promise<StoredBlock[]> {
  const rows = await db
    .selectFrom('metric_blocks')
    .selectAll()
    .where('resolution', '=', 'raw')
    .where('sealed', '=', 0)
    .where('block_start', '<', before)
    .orderBy('block_start')
    .limit(limit)
    .execute();
  return rows.map(decoded);
}

/** Deletes the blocks of one resolution whose window starts before `before`; returns how many. */
export async function pruneBlocks(db: Executor, resolution: ResolutionName, before: string): Promise<number> {
  const result = await db
    .deleteFrom('metric_blocks')
    .where('resolution', '=', resolution)
    .where('block_start', '<', before)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** What the collector needs of an instance it samples. */
export interface MonitoredInstance {
  id: string;
  account_id: string;
  status: string;
  region: string;
  instance_type: string;
  image: string;
  tags: Record<string, string>;
}

/** These instances, whatever their status, when monitoring is on (the collector's last zero samples). */
export async function monitoredInstancesById(
  db: Executor,
  ids: readonly string[],
): Promise<MonitoredInstance[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom('instances')
    .select(['id', 'account_id', 'status', 'region', 'instance_type', 'image', 'tags'])
    .where('monitoring', '=', 1)
    .where('id', 'in', ids)
    .execute();
  return rows.map((row) => ({ ...row, tags: JSON.parse(row.tags) as Record<string, string> }));
}

/**
 * Instances with monitoring on whose machine may be up (running, or stopping: its last samples fall to
 * zero), after `afterId` in id order, `limit` at a time.
 */
export async function monitoredInstances(
  db: Executor,
  afterId: string,
  limit: number,
): Promise<MonitoredInstance[]> {
  const rows = await monitoredInstancesQuery(db, afterId, limit).execute();
  return rows.map((row) => ({ ...row, tags: JSON.parse(row.tags) as Record<string, string> }));
}

/** The statement of `monitoredInstances` (its test checks the plan). */
export function monitoredInstancesQuery(db: Executor, afterId: string, limit: number) {
  return (
    db
      .selectFrom('instances')
      .select(['id', 'account_id', 'status', 'region', 'instance_type', 'image', 'tags'])
      // The condition of the partial index `instances_monitored` (migration 0015), spelled as it is
      // there (literals), so the databases read that index instead of every instance.
      .where(sql<boolean>`monitoring = 1 and status in ('running', 'stopping')`)
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(limit)
  );
}
