/**
 * Webhook subscriptions and their deliveries. Subscriptions are returned decoded (`Webhook`); their
 * secrets stay sealed here (the service opens them). Deliveries are claimed by the delivery worker under
 * a lease, like jobs: on PostgreSQL with FOR UPDATE SKIP LOCKED, so replicas never take the same one.
 */
import { sql } from 'kysely';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import type { SealedSecret } from '../../platform/master-key.js';
import { compiledOnce } from '../../platform/store/compiled-query.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import type {
  Database,
  Executor,
  WebhookDeliveryRow,
  WebhookRow,
  WebhooksTable,
} from '../../platform/store/schema.js';

import type { Webhook, WebhookStatus } from './record.js';

/** A subscription as the services see it: declared once, as a TypeBox record (record.ts). */
export type { Webhook, WebhookStatus };
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface Delivery extends Omit<WebhookDeliveryRow, 'status'> {
  status: DeliveryStatus;
}

export type WebhookChanges = Partial<Omit<Webhook, 'id' | 'account_id' | 'created_at'>>;

function fromRow(row: WebhookRow): Webhook {
  return {
    ...row,
    events: JSON.parse(row.events) as string[],
    enabled: row.enabled === 1,
    status: row.status as WebhookStatus,
  };
}

function toColumns(changes: WebhookChanges): Partial<WebhooksTable> {
  const { events, enabled, ...plain } = changes;
  return {
    ...plain,
    ...(events !== undefined ? { events: JSON.stringify(events) } : {}),
    ...(enabled !== undefined ? { enabled: enabled ? 1 : 0 } : {}),
  };
}

const asDelivery = (row: WebhookDeliveryRow): Delivery => row as Delivery;

export async function insertWebhook(db: Executor, webhook: Webhook): Promise<void> {
  await db
    .insertInto('webhooks')
    .values({ ...webhook, events: JSON.stringify(webhook.events), enabled: webhook.enabled ? 1 : 0 })
    .execute();
}

export async function findWebhook(db: Executor, accountId: string, id: string): Promise<Webhook | undefined> {
  const row = await db
    .selectFrom('webhooks')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && fromRow(row);
}

/** Subscriptions by id, in no particular order; ids not found are simply absent. */
export async function findWebhooksByIds(db: Executor, ids: readonly string[]): Promise<Webhook[]> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('webhooks').selectAll().where('id', 'in', ids).execute();
  return rows.map(fromRow);
}

export async function findWebhookById(db: Executor, id: string): Promise<Webhook | undefined> {
  const row = await db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst();
  return row && fromRow(row);
}

export async function listWebhooks(
  db: Executor,
  accountId: string,
  request: PageRequest,
): Promise<Page<Webhook>> {
  const page = await fetchPage(
    db.selectFrom('webhooks').selectAll().where('account_id', '=', accountId),
    request,
  );
  return { items: page.items.map(fromRow), pagination: page.pagination };
}

export async function countWebhooks(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function updateWebhook(
  db: Executor,
  id: string,
  changes: WebhookChanges,
): Promise<Webhook | undefined> {
  const row = await db
    .updateTable('webhooks')
    .set(toColumns(changes))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && fromRow(row);
}

export async function deleteWebhook(
  db: Executor,
  accountId: string,
  id: string,
): Promise<Webhook | undefined> {
  const row = await db
    .deleteFrom('webhooks')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  if (row) await db.deleteFrom('webhook_deliveries').where('webhook_id', '=', id).execute();
  return row && fromRow(row);
}

/** Disables an active subscription; false when it was already disabled (someone got there first). */
export async function disableWebhook(db: Executor, id: string, reason: string, at: string): Promise<boolean> {
  const result = await db
    .updateTable('webhooks')
    .set({ status: 'disabled', disabled_reason: reason, updated_at: at })
    .where('id', '=', id)
    .where('status', '=', 'active')
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Compiled once (platform/store/compiled-query.ts): every event recorded looks its account's subscriptions up. */
const subscriptionsRead = compiledOnce<Database, { accountId: string }, { id: string; events: string }>(
  (db, p) =>
    db
      .selectFrom('webhooks')
      .select(['id', 'events'])
      .where('account_id', '=', p.accountId)
      .where('enabled', '=', 1)
      .where('status', '=', 'active'),
);

/** The account's subscriptions that take deliveries now: enabled and not disabled by the platform. */
export async function liveSubscriptions(
  db: Executor,
  accountId: string,
): Promise<{ id: string; events: string[] }[]> {
  const rows = await subscriptionsRead.execute(db, { accountId });
  return rows.map((row) => ({ id: row.id, events: JSON.parse(row.events) as string[] }));
}

/** A delivery of `eventId` to `webhookId`, due at once, never tried. */
export function pendingDelivery(fields: {
  id: string;
  webhookId: string;
  accountId: string;
  eventId: string;
  eventType: string;
  at: string;
  redeliveryOf?: string;
}): Delivery {
  return {
    id: fields.id,
    webhook_id: fields.webhookId,
    account_id: fields.accountId,
    event_id: fields.eventId,
    event_type: fields.eventType,
    status: 'pending',
    attempts: 0,
    next_attempt_at: fields.at,
    lease_owner: null,
    lease_until: null,
    last_status_code: null,
    last_error: null,
    response_excerpt: null,
    duration_ms: null,
    redelivery_of: fields.redeliveryOf ?? null,
    created_at: fields.at,
    updated_at: fields.at,
  };
}

export async function insertDeliveries(db: Executor, deliveries: WebhookDeliveryRow[]): Promise<void> {
  if (deliveries.length === 0) return;
  await db.insertInto('webhook_deliveries').values(deliveries).execute();
}

/**
 * Leases up to `limit` due pending deliveries to `owner`, at most `perSubscription` in flight for any one
 * subscription counting the `inFlight` ones (by subscription id) it already has. Returns them with the
 * lease taken, and whether more might be due (then claiming again may find some).
 */
export async function claimDueDeliveries(
  db: Executor,
  owner: string,
  now: Date,
  leaseUntil: Date,
  limit: number,
  inFlight: ReadonlyMap<string, number>,
  perSubscription: number,
): Promise<{ claimed: Delivery[]; more: boolean }> {
  const nowText = now.toISOString();
  const busy = [...inFlight].filter(([, n]) => n >= perSubscription).map(([id]) => id);
  const claim = async (trx: Executor) => {
    let due = trx
      .selectFrom('webhook_deliveries')
      .select(['id', 'webhook_id'])
      .where('status', '=', 'pending')
      .where('next_attempt_at', '<=', nowText)
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', nowText)]))
      .orderBy('next_attempt_at')
      .limit(limit);
    if (busy.length > 0) due = due.where('webhook_id', 'not in', busy);
    if (isPostgres(trx)) due = due.forUpdate().skipLocked();
    const candidates = await due.execute();
    // The query cannot stop at a subscription's limit, so what is over it is left for a later claim.
    const taken = new Map(inFlight);
    const ids: string[] = [];
    for (const { id, webhook_id } of candidates) {
      const n = taken.get(webhook_id) ?? 0;
      if (n >= perSubscription) continue;
      taken.set(webhook_id, n + 1);
      ids.push(id);
    }
    if (ids.length === 0) return { claimed: [], more: false };
    // next_attempt_at moves to the lease's end: a leased delivery is out of the due range of the index
    // (so claims never walk past rows in flight), and is due again by itself if its attempt is lost.
    const rows = await trx
      .updateTable('webhook_deliveries')
      .set({
        lease_owner: owner,
        lease_until: leaseUntil.toISOString(),
        next_attempt_at: leaseUntil.toISOString(),
      })
      .where('id', 'in', ids)
      .returningAll()
      .execute();
    return { claimed: rows.map(asDelivery), more: candidates.length === limit };
  };
  // Inside a caller's transaction (the worker claims in the one that records outcomes), or in its own.
  return db.isTransaction ? claim(db) : db.transaction().execute(claim);
}

/** Leases the pending delivery of one event to one subscription (a test delivery, sent at once). */
export async function claimEventDelivery(
  db: Executor,
  webhookId: string,
  eventId: string,
  owner: string,
  leaseUntil: Date,
): Promise<Delivery | undefined> {
  const row = await db
    .updateTable('webhook_deliveries')
    .set({
      lease_owner: owner,
      lease_until: leaseUntil.toISOString(),
      next_attempt_at: leaseUntil.toISOString(),
    })
    .where('webhook_id', '=', webhookId)
    .where('event_id', '=', eventId)
    .where('status', '=', 'pending')
    .where('lease_owner', 'is', null)
    .returningAll()
    .executeTakeFirst();
  return row && asDelivery(row);
}

/** One attempt's outcome: every column recordAttempts sets. */
export interface RecordedAttempt {
  id: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  response_excerpt: string | null;
  duration_ms: number | null;
  updated_at: string;
}

// A statement per chunk size keeps the SQL texts (and so the prepared statements) to a handful.
const RECORD_CHUNKS = [64, 16, 4, 1];

/**
 * Records attempts' outcomes and drops their leases: one UPDATE … FROM (VALUES …) per chunk rather than
 * one statement per delivery. Rows whose lease `owner` no longer holds are left alone.
 */
export async function recordAttempts(
  db: Executor,
  owner: string,
  attempts: readonly RecordedAttempt[],
): Promise<void> {
  let next = 0;
  for (const size of RECORD_CHUNKS) {
    for (; attempts.length - next >= size; next += size) {
      await recordChunk(db, owner, attempts.slice(next, next + size));
    }
  }
}

async function recordChunk(db: Executor, owner: string, chunk: readonly RecordedAttempt[]): Promise<void> {
  const rows = chunk.map(
    (a) =>
      sql`(${a.id}, ${a.status}, ${a.attempts}, ${a.next_attempt_at}, ${a.last_status_code}, ${a.last_error}, ${a.response_excerpt}, ${a.duration_ms}, ${a.updated_at})`,
  );
  // VALUES columns are column1, column2, … on both engines; PostgreSQL types untyped parameters in
  // VALUES as text, hence the casts of the integer columns.
  await sql`update webhook_deliveries set
      status = v.column2,
      attempts = cast(v.column3 as integer),
      next_attempt_at = v.column4,
      last_status_code = cast(v.column5 as integer),
      last_error = v.column6,
      response_excerpt = v.column7,
      duration_ms = cast(v.column8 as integer),
      updated_at = v.column9,
      lease_owner = null,
      lease_until = null
    from (values ${sql.join(rows)}) as v
    where webhook_deliveries.id = v.column1 and webhook_deliveries.lease_owner = ${owner}`.execute(db);
}

export interface DeliveryFilters {
  status?: DeliveryStatus | undefined;
  eventType?: string | undefined;
}

export async function listDeliveries(
  db: Executor,
  webhookId: string,
  filters: DeliveryFilters,
  request: PageRequest,
): Promise<Page<Delivery>> {
  let query = db.selectFrom('webhook_deliveries').selectAll().where('webhook_id', '=', webhookId);
  if (filters.status !== undefined) query = query.where('status', '=', filters.status);
  if (filters.eventType !== undefined) query = query.where('event_type', '=', filters.eventType);
  const page = await fetchPage(query, request);
  return { items: page.items.map(asDelivery), pagination: page.pagination };
}

export async function findDelivery(
  db: Executor,
  webhookId: string,
  id: string,
): Promise<Delivery | undefined> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('webhook_id', '=', webhookId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row && asDelivery(row);
}

/** Pending deliveries of a subscription become failed (it was disabled); returns how many. */
export async function failPendingDeliveries(
  db: Executor,
  webhookId: string,
  reason: string,
  at: string,
): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', next_attempt_at: null, last_error: reason, updated_at: at })
    .where('webhook_id', '=', webhookId)
    .where('status', '=', 'pending')
    .where(sql<boolean>`lease_owner is null`)
    .execute();
}

/** One subscription's sealed secret, for checking a master key against the store; none: undefined. */
export async function anySealedWebhookSecret(db: Executor): Promise<SealedSecret | undefined> {
  const webhook = await db.selectFrom('webhooks').select(['id', 'secret']).limit(1).executeTakeFirst();
  return webhook && { sealed: webhook.secret, boundTo: webhook.id };
}
