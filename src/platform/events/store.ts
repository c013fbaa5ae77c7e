import { sql } from 'kysely';
import type { Page, PageRequest } from '../domain/pagination.js';
import { compiledOnce } from '../store/compiled-query.js';
import { fetchPage } from '../store/lists.js';
import type { Database, EventRow, Executor } from '../store/schema.js';
import type { Actor } from './actor.js';

export interface NewEvent {
  id: string;
  account_id: string;
  type: string;
  resource_id: string;
  data: Record<string, unknown>;
  created_at: string;
  /** Absent: the system's. */
  actor?: Actor;
}

type EventColumns = Omit<EventRow, 'seq'>;

const eventInsert = compiledOnce<Database, EventColumns, never>((db, p) =>
  db.insertInto('events').values({
    id: p.id,
    account_id: p.account_id,
    type: p.type,
    resource_id: p.resource_id,
    data: p.data,
    created_at: p.created_at,
    actor_type: p.actor_type,
    actor_id: p.actor_id,
    actor_ip: p.actor_ip,
  }),
);

/** Call inside the transaction that makes the change the event reports (transactional outbox). */
export async function insertEvent(db: Executor, event: NewEvent): Promise<void> {
  const { actor, ...columns } = event;
  await eventInsert.write(db, {
    ...columns,
    data: JSON.stringify(event.data),
    actor_type: actor?.type ?? 'system',
    actor_id: actor?.type === 'api_key' ? actor.id : null,
    actor_ip: actor?.type === 'api_key' ? actor.ip : null,
  });
}

/** An event as read back: its data decoded, its actor whole. */
export interface StoredEvent
  extends Omit<EventRow, 'seq' | 'account_id' | 'data' | 'actor_type' | 'actor_id' | 'actor_ip'> {
  data: Record<string, unknown>;
  actor: Actor;
}

const COLUMNS = [
  'id',
  'type',
  'resource_id',
  'data',
  'created_at',
  'actor_type',
  'actor_id',
  'actor_ip',
] as const;

/** The actor a row names; a key's row without its id (never written so) reads as the system's. */
function actorOf(row: Pick<EventRow, 'actor_type' | 'actor_id' | 'actor_ip'>): Actor {
  if (row.actor_type === 'api_key' && row.actor_id !== null) {
    return { type: 'api_key', id: row.actor_id, ip: row.actor_ip ?? '' };
  }
  return row.actor_type === 'operator' ? { type: 'operator' } : { type: 'system' };
}

const decoded = ({
  actor_type,
  actor_id,
  actor_ip,
  ...row
}: Omit<EventRow, 'seq' | 'account_id'>): StoredEvent => ({
  ...row,
  data: JSON.parse(row.data) as Record<string, unknown>,
  actor: actorOf({ actor_type, actor_id, actor_ip }),
});

export interface EventFilter {
  /** Exact type. */
  type?: string | undefined;
  /** Every type starting with this text (e.g. `instance.`); matched literally. */
  typePrefix?: string | undefined;
  resourceId?: string | undefined;
  /** ISO 8601 UTC as `Date.toISOString()` writes it, so text order is time order; inclusive. */
  since?: string | undefined;
  actorType?: Actor['type'] | undefined;
  /** An API key's id: the events written for requests made with it. */
  actorId?: string | undefined;
}

/** `%`, `_` and `\` are LIKE wildcards or the escape; a prefix must match them as themselves. */
function likePrefix(prefix: string): string {
  return `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * One page of an account's events, ordered by `seq` (the order rows were inserted), whatever the
 * request's sort: created_at can tie within a millisecond and comes from each replica's own clock, so it
 * cannot order events on its own. `seq` is unique, so the helper's id tie-break never comes into play.
 */
export async function listEvents(
  db: Executor,
  accountId: string,
  filter: EventFilter,
  request: PageRequest,
): Promise<Page<StoredEvent>> {
  let query = db.selectFrom('events').select(COLUMNS).where('account_id', '=', accountId);
  if (filter.type !== undefined) query = query.where('type', '=', filter.type);
  if (filter.typePrefix !== undefined) {
    // ESCAPE is explicit: SQLite has no default escape character.
    query = query.where(sql<boolean>`${sql.ref('type')} like ${likePrefix(filter.typePrefix)} escape '\\'`);
  }
  if (filter.resourceId !== undefined) query = query.where('resource_id', '=', filter.resourceId);
  if (filter.since !== undefined) query = query.where('created_at', '>=', filter.since);
  if (filter.actorType !== undefined) query = query.where('actor_type', '=', filter.actorType);
  if (filter.actorId !== undefined) query = query.where('actor_id', '=', filter.actorId);
  const page = await fetchPage(query, { ...request, sort: 'seq' });
  return { items: page.items.map(decoded), pagination: page.pagination };
}

export async function findEvent(
  db: Executor,
  accountId: string,
  id: string,
): Promise<StoredEvent | undefined> {
  const row = await db
    .selectFrom('events')
    .select(COLUMNS)
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && decoded(row);
}

/** An event by id alone, for the delivery worker (which has it from a delivery of the same account). */
export async function findEventById(db: Executor, id: string): Promise<StoredEvent | undefined> {
  const row = await db.selectFrom('events').select(COLUMNS).where('id', '=', id).executeTakeFirst();
  return row && decoded(row);
}
