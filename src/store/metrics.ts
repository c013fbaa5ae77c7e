/**
 * Repository of metric blocks (migration 0008): the encoded blocks of domain/metric-blocks.ts, one row
 * per instance per resolution per window. It stores bytes and knows nothing of their format.
 */
import { sql } from 'kysely';
import type { Executor } from './schema.js';

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

/** Rows per insert statement: 9 parameters a row stays well inside both engines' parameter limits. */
const UPSERT_CHUNK = 400;

export async function upsertBlocks(db: Executor, blocks: readonly StoredBlock[], at: string): Promise<void> {
  for (let i = 0; i < blocks.length; i += UPSERT_CHUNK) {
    const rows = blocks.slice(i, i + UPSERT_CHUNK).map((block) => ({
      ...block,
      sealed: block.sealed ? 1 : 0,
      updated_at: at,
    }));
    await db
      .insertInto('metric_blocks')
      .values(rows)
      .onConflict((conflict) =>
        conflict.columns(['instance_id', 'resolution', 'block_start']).doUpdateSet({
          data: sql`excluded.data`,
          points: sql`excluded.points`,
          sealed: sql`excluded.sealed`,
          updated_at: sql`excluded.updated_at`,
        }),
      )
      .execute();
  }
}

function decoded(row: {
  instance_id: string;
  resolution: string;
  block_start: string;
  account_id: string;
  sealed: number;
  points: number;
  data: Uint8Array;
}): StoredBlock {
  return { ...row, resolution: row.resolution as ResolutionName, sealed: row.sealed === 1 };
}

/** The instance's blocks of one resolution whose window starts in [fromStart, toStart], oldest first. */
export async function blocksBetween(
  db: Executor,
  instanceId: string,
  resolution: ResolutionName,
  fromStart: string,
  toStart: string,
): Promise<StoredBlock[]> {
  const rows = await db
    .selectFrom('metric_blocks')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('resolution', '=', resolution)
    .where('block_start', '>=', fromStart)
    .where('block_start', '<=', toStart)
    .orderBy('block_start')
    .execute();
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
  const rows = await db
    .selectFrom('instances')
    .select(['id', 'account_id', 'status', 'region', 'instance_type', 'image', 'tags'])
    .where('monitoring', '=', 1)
    .where('status', 'in', ['running', 'stopping'])
    .where('id', '>', afterId)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({ ...row, tags: JSON.parse(row.tags) as Record<string, string> }));
}
