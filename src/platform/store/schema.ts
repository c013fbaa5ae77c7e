/**
 * Row types of every table, shared by SQLite and PostgreSQL. Timestamps are ISO 8601 UTC strings with
 * millisecond precision (they sort as text on both engines); booleans are 0/1 integers; JSON is text.
 * The tables of records declared in TypeBox (instances, volumes, snapshots, VPNs and their peers, public
 * IPs, firewall rules, SSH keys, webhooks, API keys, alert policies and incidents, invoices) are not
 * written here: each resource's store derives its table from its record (`RowFor`,
 * platform/store/record-table.ts) and adds it to `Database` by module augmentation, so the platform
 * imports no resource and a column is declared once, as the record's field.
 */
import type { Generated, Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';
import type { AccountStatus, Plan } from '../domain/plans.js';

export interface AccountsTable {
  id: string;
  name: string;
  email: string;
  company: string | null;
  billing_email: string | null;
  plan: Plan;
  status: AccountStatus;
  rate_limit_per_hour: number | null;
  rate_limit_burst: number | null;
  created_at: string;
  updated_at: string;
}

export interface AccountQuotasTable {
  account_id: string;
  name: string;
  limit: number;
}

export interface IdempotencyKeysTable {
  account_id: string;
  key: string;
  fingerprint: string;
  /**
   * in_progress: claimed, nothing committed yet; committed: the create committed what it made (the
   * resource_* columns) but its answer is not saved yet; completed: the answer is saved.
   */
  state: 'in_progress' | 'committed' | 'completed';
  response_status: number | null;
  response_body: string | null;
  locked_until: string;
  created_at: string;
  expires_at: string;
  /** The claim holding the key (a random id per claim); null on rows older than 0016. */
  claimed_by: string | null;
  resource_kind: string | null;
  resource_id: string | null;
}

export interface EventsTable {
  seq: Generated<number>;
  id: string;
  account_id: string;
  type: string;
  resource_id: string;
  /** JSON object. */
  data: string;
  created_at: string;
  /** Who it was written for (platform/events/actor.ts): `api_key`, `operator` or `system`. */
  actor_type: string;
  /** The API key's id, for `api_key`. */
  actor_id: string | null;
  /** The client's address, for `api_key`. */
  actor_ip: string | null;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface InstanceTagsTable {
  instance_id: string;
  account_id: string;
  key: string;
  value: string;
}

/** Maintained counts of instances per account, region and status, so lists never count rows. */
export interface InstanceCountsTable {
  account_id: string;
  region: string;
  status: string;
  count: number;
}

/** Maintained quota usage per account (platform/quotas/usage-store.ts); a missing row is zero. */
export interface AccountUsageTable {
  account_id: string;
  name: string;
  used: number;
}

/** An address scope's pool and the first address of it never handed out (resources/addresses/address-store.ts). */
export interface AddressPoolsTable {
  scope: string;
  cidr: string;
  next_ip: number;
}

/** Addresses below their scope's `next_ip` that nobody holds. */
export interface FreeAddressesTable {
  scope: string;
  ip: number;
}

/**
 * Public addresses held by neither an instance nor a VPN gateway (resources/addresses/address-holds.ts):
 * `router:<account id>` (a VPC's router on the public link) or `gateway` (the upstream router).
 */
export interface PublicAddressHoldsTable {
  region: string;
  ip: string;
  holder: string;
  created_at: string;
}

/** GPUs held per region by instances of every account, checked against the region's capacity. */
export interface RegionGpuUsageTable {
  region: string;
  gpus: number;
}

/** One row per volume or instance with a backup schedule; the scheduler reads the due ones by next_due_at. */
export interface BackupSchedulesTable {
  /** The volume or instance id. */
  source_id: string;
  account_id: string;
  /** 'volume' or 'instance'. */
  source_kind: string;
  frequency: string;
  retention: number;
  next_due_at: string;
  created_at: string;
}

export interface VolumeTagsTable {
  volume_id: string;
  account_id: string;
  key: string;
  value: string;
}

export interface JobsTable {
  id: string;
  /** One job per key (e.g. `instance:<id>`): enqueueing an existing key moves its run_at instead. */
  key: string;
  kind: string;
  subject_id: string;
  run_at: string;
  attempts: number;
  /** Bumped on every enqueue, so a runner finishing an older run does not delete a newer request. */
  version: number;
  lease_owner: string | null;
  lease_until: string | null;
  last_error: string | null;
  created_at: string;
}

export interface WebhookDeliveriesTable {
  id: string;
  webhook_id: string;
  account_id: string;
  event_id: string;
  event_type: string;
  /** pending, succeeded or failed. */
  status: string;
  attempts: number;
  /** When a pending delivery is next tried; null once it is settled. */
  next_attempt_at: string | null;
  lease_owner: string | null;
  lease_until: string | null;
  last_status_code: number | null;
  last_error: string | null;
  response_excerpt: string | null;
  duration_ms: number | null;
  /** The delivery this one repeats, when a user asked for a redelivery. */
  redelivery_of: string | null;
  created_at: string;
  updated_at: string;
}

/** Metric samples as compact blocks (resources/metrics/blocks.ts); see migration 0008. */
export interface MetricBlocksTable {
  instance_id: string;
  /** `raw` (10 s, hour blocks) or `rollup` (5 min, day blocks). */
  resolution: string;
  /** ISO 8601 UTC start of the block's window. */
  block_start: string;
  account_id: string;
  /** 1 once a raw block's hour is over and its rollups are written. */
  sealed: number;
  /** Slots holding a sample. */
  points: number;
  data: Uint8Array;
  updated_at: string;
}

export interface Database extends BillingTables, AlertTables {
  accounts: AccountsTable;
  account_quotas: AccountQuotasTable;
  idempotency_keys: IdempotencyKeysTable;
  events: EventsTable;
  settings: SettingsTable;
  instance_tags: InstanceTagsTable;
  instance_counts: InstanceCountsTable;
  region_gpu_usage: RegionGpuUsageTable;
  account_usage: AccountUsageTable;
  address_pools: AddressPoolsTable;
  free_addresses: FreeAddressesTable;
  public_address_holds: PublicAddressHoldsTable;
  volume_tags: VolumeTagsTable;
  backup_schedules: BackupSchedulesTable;
  jobs: JobsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  metric_blocks: MetricBlocksTable;
}

/** Anything queries run on: the database itself or a transaction. */
export type Executor = Kysely<Database> | Transaction<Database>;

export type AccountRow = Selectable<AccountsTable>;
export type NewAccountRow = Insertable<AccountsTable>;
export type AccountUpdate = Updateable<AccountsTable>;
export type EventRow = Selectable<EventsTable>;
export type JobRow = Selectable<JobsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type BackupScheduleRow = Selectable<BackupSchedulesTable>;

/** Billing's tables (migration 0009): metered intervals, invoices and their lines, counters. */
export interface BillingTables {
  meter_segments: MeterSegmentsTable;
  meter_month_totals: MeterMonthTotalsTable;
  invoice_lines: InvoiceLinesTable;
  billing_counters: BillingCountersTable;
  transfer_counters: TransferCountersTable;
  transfer_day_totals: TransferDayTotalsTable;
}

/** The last transfer reading counted per instance (migration 0022, resources/billing/transfer.ts). */
export interface TransferCountersTable {
  resource_id: string;
  bytes_out: number;
  bytes_in: number;
  epoch: string | null;
  read_at: string;
}

/** Bytes to and from public addresses per account, UTC day and instance (migration 0022). */
export interface TransferDayTotalsTable {
  account_id: string;
  /** Epoch second at which the UTC day starts. */
  day_s: number;
  resource_id: string;
  resource_name: string;
  region: string;
  bytes_out: number;
  bytes_in: number;
}

/** One interval in which a resource paid one price; open while `end_s` is null. */
export interface MeterSegmentsTable {
  seq: Generated<number>;
  account_id: string;
  resource_id: string;
  resource_type: string;
  resource_name: string;
  meter: string;
  region: string;
  instance_type: string | null;
  size_gb: number | null;
  unit: string;
  unit_price_micros: number;
  started_at: string;
  /** Epoch second of started_at (taken down): what billing counts from. */
  start_s: number;
  ended_at: string | null;
  end_s: number | null;
  /** 1: the interval (while open) marks its month's row of the totals; 0: a new resource's first, which does not. */
  month_marked: Generated<number>;
}

/** Seconds of closed intervals per account, UTC month, resource and price (resources/billing/meter-store.ts). */
export interface MeterMonthTotalsTable {
  /** Epoch second at which the month starts. */
  month_s: number;
  account_id: string;
  resource_id: string;
  /** meter|instance_type|size_gb|unit_price_micros: the price, in a column that is never null. */
  price_key: string;
  resource_type: string;
  resource_name: string;
  meter: string;
  instance_type: string | null;
  size_gb: number | null;
  unit: string;
  unit_price_micros: number;
  seconds: number;
  /** The `seq` of the first interval counted: lines keep the order resources began in. */
  first_seq: number;
  /** Start (epoch second) of the resource's interval open at this price, begun this month; else null. */
  open_start_s: number | null;
}

export interface InvoiceLinesTable {
  invoice_id: string;
  position: number;
  resource_id: string | null;
  resource_type: string;
  meter: string;
  description: string;
  instance_type: string | null;
  unit: string;
  /** Seconds (hours) or GB-seconds (GB-months), decimal text. */
  quantity_numerator: string;
  unit_price_micros: number | null;
  /** Exact amount, decimal text. */
  amount: string;
}

export interface BillingCountersTable {
  name: string;
  value: number;
}

/**
 * Alerts' tables (migration 0011) that have no record: notifications and the policy generation. Policies
 * and incidents are derived from their records in resources/alerts/store.ts.
 */
export interface AlertTables {
  alert_notifications: AlertNotificationsTable;
  alert_counters: AlertCountersTable;
}

export interface AlertNotificationsTable {
  id: string;
  incident_id: string;
  account_id: string;
  /** firing or resolved. */
  transition: string;
  /** The alert.firing or alert.resolved event of the transition: what the message says. */
  event_id: string;
  /** email, webhook or chat. */
  channel: string;
  /** The address, the webhook id, or the chat URL. */
  target: string;
  /** The chat format (slack, discord, generic); null for the other channels. */
  format: string | null;
  /** The webhook delivery that carries a webhook notification; null for the other channels. */
  delivery_id: string | null;
  /** pending, succeeded or failed (webhook notifications: read from their delivery). */
  status: string;
  attempts: number;
  next_attempt_at: string | null;
  last_error: string | null;
  sent_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface AlertCountersTable {
  name: string;
  value: number;
}
