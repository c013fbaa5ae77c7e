/**
 * Alert policies, incidents and notifications (migration 0011). Policies are returned decoded
 * (`AlertPolicy`); every policy write bumps the `generation` counter in its transaction, so the evaluator
 * knows when to read them again. Incidents open and resolve guarded on their status, and the partial
 * unique index keeps one open incident per policy and instance whatever writes them.
 */

import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import { targetColumns, targetsOf } from '../../platform/domain/targets.js';
import { Timestamp } from '../../platform/http/schemas.js';
import { isPostgres } from '../../platform/store/dialect.js';
import { fetchPage } from '../../platform/store/lists.js';
import {
  booleanInteger,
  jsonText,
  nullableNumberColumn,
  type RowFor,
  recordRows,
} from '../../platform/store/record-table.js';
import type { AlertNotificationsTable, Executor } from '../../platform/store/schema.js';
import { type AlertIncident, AlertIncidentRecord, AlertPolicyRecord } from './record.js';
import type {
  AlertChannels,
  AlertPolicy,
  ChannelKind,
  ChatFormat,
  IncidentStatus,
  NotificationStatus,
  Resolution,
} from './rules.js';

type Targets = AlertPolicy['targets'];

/**
 * The columns of a policy (migrations 0011, 0014): the record's fields, with `window` kept as
 * `time_window` and `targets` as one column per part, and `deleted_at`, which only this module reads.
 */
const PolicyColumns = Type.Composite([
  Type.Omit(AlertPolicyRecord, ['window', 'targets']),
  Type.Object({
    time_window: AlertPolicyRecord.properties.window,
    target_instance_ids: AlertPolicyRecord.properties.targets.properties.instance_ids,
    target_tags: AlertPolicyRecord.properties.targets.properties.tags,
    /** Set when deleted while its incidents' resolved messages are still to be sent (then purged). */
    deleted_at: Type.Union([Timestamp, Type.Null()]),
  }),
]);
type StoredPolicy = Static<typeof PolicyColumns>;

/** Targets and channels are kept as JSON text and `enabled` as 0/1; every other field is its own column. */
const policyCodecs = {
  threshold: nullableNumberColumn,
  target_instance_ids: jsonText<Targets['instance_ids']>(),
  target_tags: jsonText<Targets['tags']>(),
  channels: jsonText<AlertChannels>(),
  enabled: booleanInteger,
};
/** Incidents' measurements are numbers; every other field is its own column. */
const incidentCodecs = {
  value: nullableNumberColumn,
  threshold: nullableNumberColumn,
  resolved_value: nullableNumberColumn,
};

/** The alert_policies and alert_incidents tables: the records' fields as columns (policies: as above). */
export type AlertPoliciesTable = RowFor<StoredPolicy, typeof policyCodecs>;
export type AlertIncidentsTable = RowFor<AlertIncident, typeof incidentCodecs>;
declare module '../../platform/store/schema.js' {
  interface Database {
    alert_policies: AlertPoliciesTable;
    alert_incidents: AlertIncidentsTable;
  }
}

const policyRows = recordRows({ table: 'alert_policies', record: PolicyColumns, codecs: policyCodecs });
const incidentRows = recordRows({
  table: 'alert_incidents',
  record: AlertIncidentRecord,
  codecs: incidentCodecs,
});

function fromRow(row: AlertPoliciesTable): AlertPolicy {
  const {
    time_window,
    target_instance_ids,
    target_tags,
    deleted_at: _deleted,
    ...policy
  } = policyRows.decode(row);
  return { ...policy, window: time_window, targets: targetsOf({ target_instance_ids, target_tags }) };
}

export type PolicyChanges = Partial<Omit<AlertPolicy, 'id' | 'account_id' | 'created_at'>>;

function toColumns(changes: PolicyChanges): Partial<AlertPoliciesTable> {
  const { window, targets, ...fields } = changes;
  const stored: Partial<StoredPolicy> = {
    ...fields,
    ...(window !== undefined ? { time_window: window } : {}),
    ...(targets !== undefined ? targetColumns(targets) : {}),
  };
  return policyRows.encode(stored);
}

/** Bumps the policy generation; call in the transaction of every policy write. */
async function bumpGeneration(db: Executor): Promise<void> {
  await db
    .updateTable('alert_counters')
    .set({ value: sql<number>`value + 1` })
    .where('name', '=', 'generation')
    .execute();
}

/** The policy generation: it changes whenever a policy is created, changed or deleted. */
export async function policyGeneration(db: Executor): Promise<number> {
  const row = await db
    .selectFrom('alert_counters')
    .select('value')
    .where('name', '=', 'generation')
    .executeTakeFirst();
  return Number(row?.value ?? 0);
}

export async function insertPolicy(db: Executor, policy: AlertPolicy): Promise<void> {
  await db
    .insertInto('alert_policies')
    .values({
      ...toColumns(policy),
      id: policy.id,
      account_id: policy.account_id,
      created_at: policy.created_at,
      deleted_at: null,
    } as AlertPoliciesTable)
    .execute();
  await bumpGeneration(db);
}

export async function findPolicy(
  db: Executor,
  accountId: string,
  id: string,
): Promise<AlertPolicy | undefined> {
  const row = await db
    .selectFrom('alert_policies')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  return row && fromRow(row);
}

/** Reads the account's policy and holds it until the transaction ends (a row lock on PostgreSQL). */
export async function lockPolicy(
  db: Executor,
  accountId: string,
  id: string,
): Promise<AlertPolicy | undefined> {
  let query = db
    .selectFrom('alert_policies')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null);
  if (isPostgres(db)) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  return row && fromRow(row);
}

export type PolicySort = 'created_at' | 'name';

export async function listPolicies(
  db: Executor,
  accountId: string,
  filters: { enabled?: boolean | undefined },
  request: PageRequest<PolicySort>,
): Promise<Page<AlertPolicy>> {
  let query = db
    .selectFrom('alert_policies')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null);
  if (filters.enabled !== undefined) query = query.where('enabled', '=', filters.enabled ? 1 : 0);
  const page = await fetchPage(query, request);
  return { items: page.items.map(fromRow), pagination: page.pagination };
}

export async function countPolicies(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('alert_policies')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function updatePolicy(
  db: Executor,
  id: string,
  changes: PolicyChanges,
): Promise<AlertPolicy | undefined> {
  const row = await db
    .updateTable('alert_policies')
    .set(toColumns(changes))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  if (row) await bumpGeneration(db);
  return row && fromRow(row);
}

/** Deletes the policy; its incidents and their notifications go with it (foreign keys). */
export async function deletePolicy(
  db: Executor,
  accountId: string,
  id: string,
): Promise<AlertPolicy | undefined> {
  const row = await db
    .deleteFrom('alert_policies')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  if (!row) return undefined;
  await bumpGeneration(db);
  return fromRow(row);
}

/**
 * Marks the policy deleted (and disabled): it is gone for the API and the evaluator, while the resolved
 * messages of the incidents its delete resolved are sent; purgeDeletedPolicies removes it after.
 */
export async function markPolicyDeleted(db: Executor, id: string, at: string): Promise<void> {
  await db
    .updateTable('alert_policies')
    .set({ deleted_at: at, enabled: 0, updated_at: at })
    .where('id', '=', id)
    .execute();
  await bumpGeneration(db);
}

/**
 * Deletes the policies marked deleted that have no e-mail or chat notification left to send (webhook
 * notifications are deliveries of their own, which outlive the policy); returns how many went.
 */
export async function purgeDeletedPolicies(db: Executor): Promise<number> {
  const result = await db
    .deleteFrom('alert_policies')
    .where('deleted_at', 'is not', null)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('alert_notifications')
            .innerJoin('alert_incidents', 'alert_incidents.id', 'alert_notifications.incident_id')
            .select('alert_notifications.id')
            .whereRef('alert_incidents.policy_id', '=', 'alert_policies.id')
            .where('alert_notifications.status', '=', 'pending')
            .where('alert_notifications.channel', 'in', ['email', 'chat']),
        ),
      ),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** Every enabled policy of every account: what the evaluator watches. */
export async function enabledPolicies(db: Executor): Promise<AlertPolicy[]> {
  const rows = await db.selectFrom('alert_policies').selectAll().where('enabled', '=', 1).execute();
  return rows.map(fromRow);
}

/**
 * These policies as they are now, held against deletion until the transaction ends (a share lock on
 * PostgreSQL): an incident is opened only for a policy that still exists, and a delete that comes
 * meanwhile waits and then takes the new incident with it.
 */
export async function holdPolicies(db: Executor, ids: readonly string[]): Promise<Map<string, AlertPolicy>> {
  if (ids.length === 0) return new Map();
  let query = db.selectFrom('alert_policies').selectAll().where('id', 'in', ids);
  if (isPostgres(db)) query = query.forShare();
  const rows = await query.execute();
  return new Map(rows.map((row) => [row.id, fromRow(row)]));
}

// ---------------------------------------------------------------------------------------------------
// Incidents
// ---------------------------------------------------------------------------------------------------

/** An incident as the services see it: declared once, as a TypeBox record (record.ts). */
export type Incident = AlertIncident;

const incidentFromRow = incidentRows.decode;

export async function insertIncident(db: Executor, incident: Incident): Promise<void> {
  await db
    .insertInto('alert_incidents')
    .values(incidentRows.encode(incident) as AlertIncidentsTable)
    .execute();
}

/** Resolves the incident if it is still firing; the incident as resolved, or undefined when it was not. */
export async function resolveIncident(
  db: Executor,
  id: string,
  changes: { resolved_value: number | null; resolution: Resolution; resolved_at: string },
): Promise<Incident | undefined> {
  const row = await db
    .updateTable('alert_incidents')
    .set({ ...changes, status: 'resolved', updated_at: changes.resolved_at })
    .where('id', '=', id)
    .where('status', '=', 'firing')
    .returningAll()
    .executeTakeFirst();
  return row && incidentFromRow(row);
}

/** Every open incident (the evaluator reads them when it takes over). */
export async function openIncidents(db: Executor): Promise<Incident[]> {
  const rows = await db.selectFrom('alert_incidents').selectAll().where('status', '=', 'firing').execute();
  return rows.map(incidentFromRow);
}

export interface IncidentFilters {
  policyId?: string | undefined;
  status?: IncidentStatus | undefined;
  instanceId?: string | undefined;
}

export async function listIncidents(
  db: Executor,
  accountId: string,
  filters: IncidentFilters,
  request: PageRequest<'started_at'>,
): Promise<Page<Incident>> {
  let query = db
    .selectFrom('alert_incidents')
    .selectAll()
    .where('account_id', '=', accountId)
    // A deleted policy's incidents go with it (some stay a while, until their messages are sent).
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('alert_policies')
            .select('alert_policies.id')
            .whereRef('alert_policies.id', '=', 'alert_incidents.policy_id')
            .where('alert_policies.deleted_at', 'is not', null),
        ),
      ),
    );
  if (filters.policyId !== undefined) query = query.where('policy_id', '=', filters.policyId);
  if (filters.status !== undefined) query = query.where('status', '=', filters.status);
  if (filters.instanceId !== undefined) query = query.where('instance_id', '=', filters.instanceId);
  const page = await fetchPage(query, request);
  return { items: page.items.map(incidentFromRow), pagination: page.pagination };
}

// ---------------------------------------------------------------------------------------------------
// Notifications
// ---------------------------------------------------------------------------------------------------

export interface Notification {
  id: string;
  incident_id: string;
  account_id: string;
  transition: 'firing' | 'resolved';
  event_id: string;
  channel: ChannelKind;
  target: string;
  format: ChatFormat | null;
  delivery_id: string | null;
  status: NotificationStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_error: string | null;
  sent_at: string | null;
  created_at: string;
  updated_at: string;
}

const asNotification = (row: AlertNotificationsTable): Notification => row as Notification;

export async function insertNotifications(
  db: Executor,
  notifications: readonly Notification[],
): Promise<void> {
  for (let i = 0; i < notifications.length; i += 200) {
    await db
      .insertInto('alert_notifications')
      .values(notifications.slice(i, i + 200))
      .execute();
  }
}

export async function findNotification(db: Executor, id: string): Promise<Notification | undefined> {
  const row = await db.selectFrom('alert_notifications').selectAll().where('id', '=', id).executeTakeFirst();
  return row && asNotification(row);
}

/** E-mail and chat notifications due by `now`, oldest first (served by alert_notifications_due). */
export async function dueNotifications(db: Executor, now: string, limit: number): Promise<Notification[]> {
  const rows = await db
    .selectFrom('alert_notifications')
    .selectAll()
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .where('channel', 'in', ['email', 'chat'])
    .orderBy('next_attempt_at')
    .limit(limit)
    .execute();
  return rows.map(asNotification);
}

/** When the next pending e-mail or chat notification is due; null when none is pending. */
export async function nextNotificationDue(db: Executor): Promise<string | null> {
  const row = await db
    .selectFrom('alert_notifications')
    .select((eb) => eb.fn.min('next_attempt_at').as('next'))
    .where('status', '=', 'pending')
    .where('next_attempt_at', 'is not', null)
    .where('channel', 'in', ['email', 'chat'])
    .executeTakeFirst();
  return (row?.next as string | null | undefined) ?? null;
}

/** Writes an attempt's outcome if the notification is still pending (a repeat after a lost lease writes nothing). */
export async function recordNotificationAttempt(
  db: Executor,
  id: string,
  changes: Pick<
    Notification,
    'status' | 'attempts' | 'next_attempt_at' | 'last_error' | 'sent_at' | 'updated_at'
  >,
): Promise<boolean> {
  const result = await db
    .updateTable('alert_notifications')
    .set(changes)
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** What the API shows of a notification: webhook ones as their delivery stands. */
export interface NotificationState {
  incident_id: string;
  transition: 'firing' | 'resolved';
  channel: ChannelKind;
  target: string;
  status: NotificationStatus;
  attempts: number;
  last_error: string | null;
  created_at: string;
  id: string;
}

/** The notifications of these incidents, oldest first; a webhook one reads its delivery's status. */
export async function notificationsOf(
  db: Executor,
  incidentIds: readonly string[],
): Promise<Map<string, NotificationState[]>> {
  const out = new Map<string, NotificationState[]>();
  if (incidentIds.length === 0) return out;
  const rows = await db
    .selectFrom('alert_notifications as n')
    .leftJoin('webhook_deliveries as d', 'd.id', 'n.delivery_id')
    .select([
      'n.id',
      'n.incident_id',
      'n.transition',
      'n.channel',
      'n.target',
      'n.status',
      'n.attempts',
      'n.last_error',
      'n.created_at',
      'n.delivery_id',
      'd.status as delivery_status',
      'd.attempts as delivery_attempts',
      'd.last_error as delivery_error',
    ])
    .where('n.incident_id', 'in', incidentIds)
    .orderBy('n.created_at')
    .orderBy('n.id')
    .execute();
  for (const row of rows) {
    const viaWebhook = row.channel === 'webhook';
    const gone = viaWebhook && row.delivery_status === null;
    const state: NotificationState = {
      id: row.id,
      incident_id: row.incident_id,
      transition: row.transition as 'firing' | 'resolved',
      channel: row.channel as ChannelKind,
      target: row.target,
      status: (viaWebhook
        ? gone
          ? row.status === 'pending'
            ? 'failed'
            : row.status
          : row.delivery_status
        : row.status) as NotificationStatus,
      attempts: viaWebhook ? Number(row.delivery_attempts ?? row.attempts) : row.attempts,
      last_error: viaWebhook
        ? gone
          ? (row.last_error ?? 'The webhook subscription is gone')
          : (row.delivery_error ?? null)
        : row.last_error,
      created_at: row.created_at,
    };
    const list = out.get(row.incident_id) ?? [];
    list.push(state);
    out.set(row.incident_id, list);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Instances, as the evaluator and the policy checks read them
// ---------------------------------------------------------------------------------------------------

export interface WatchedInstance {
  id: string;
  account_id: string;
  name: string;
  status: string;
  monitoring: boolean;
  tags: Record<string, string>;
  /** When the action under way was asked for (how long a stuck instance has been stuck). */
  operation_at: string | null;
  updated_at: string;
}

function watched(row: {
  id: string;
  account_id: string;
  name: string;
  status: string;
  monitoring: number;
  tags: string;
  operation_at: string | null;
  updated_at: string;
}): WatchedInstance {
  return { ...row, monitoring: row.monitoring === 1, tags: JSON.parse(row.tags) as Record<string, string> };
}

const WATCHED_COLUMNS = [
  'id',
  'account_id',
  'name',
  'status',
  'monitoring',
  'tags',
  'operation_at',
  'updated_at',
] as const;

/** These instances (any account); ids not found are absent. */
export async function watchedInstances(db: Executor, ids: readonly string[]): Promise<WatchedInstance[]> {
  const found: WatchedInstance[] = [];
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await db
      .selectFrom('instances')
      .select(WATCHED_COLUMNS)
      .where('id', 'in', ids.slice(i, i + 500))
      .execute();
    found.push(...rows.map(watched));
  }
  return found;
}

/** The instances of these accounts in one of `statuses` (served by the account/status index). */
export async function instancesInStatuses(
  db: Executor,
  accountIds: readonly string[],
  statuses: readonly string[],
): Promise<WatchedInstance[]> {
  const found: WatchedInstance[] = [];
  for (let i = 0; i < accountIds.length; i += 500) {
    const rows = await db
      .selectFrom('instances')
      .select(WATCHED_COLUMNS)
      .where('account_id', 'in', accountIds.slice(i, i + 500))
      .where('status', 'in', statuses)
      .execute();
    found.push(...rows.map(watched));
  }
  return found;
}

/** Which of these ids are the account's, in `table` (a policy's instances, its webhook channels). */
export async function accountOwnedIds(
  db: Executor,
  table: 'instances' | 'webhooks',
  accountId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom(table)
    .select('id')
    .where('account_id', '=', accountId)
    .where('id', 'in', ids)
    .execute();
  return new Set(rows.map((row) => row.id));
}
