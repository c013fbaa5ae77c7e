/**
 * The events the status relay (resources/metrics/status-relay.ts) passes on to live streams — instance
 * transitions and alert incidents (`alert.firing`, `alert.resolved`) — read from the outbox (the events
 * table) in insertion order.
 */
import { sql } from 'kysely';
import type { Executor } from '../../platform/store/schema.js';

export interface InstanceStatusEvent {
  seq: number;
  id: string;
  account_id: string;
  type: string;
  resource_id: string;
  data: Record<string, unknown>;
  created_at: string;
}

/** The highest `seq` written so far (0 when there are no events). */
export async function lastEventSeq(db: Executor): Promise<number> {
  const row = await db
    .selectFrom('events')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .executeTakeFirst();
  return Number(row?.seq ?? 0);
}

/** Instance and alert events with `seq` above `afterSeq`, oldest first, at most `limit`. */
export async function streamEventsAfter(
  db: Executor,
  afterSeq: number,
  limit: number,
): Promise<InstanceStatusEvent[]> {
  const rows = await db
    .selectFrom('events')
    .select(['seq', 'id', 'account_id', 'type', 'resource_id', 'data', 'created_at'])
    .where('seq', '>', afterSeq)
    .where(sql<boolean>`(${sql.ref('type')} like 'instance.%' or ${sql.ref('type')} like 'alert.%')`)
    .orderBy('seq')
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    ...row,
    seq: Number(row.seq),
    data: JSON.parse(row.data) as Record<string, unknown>,
  }));
}
