/**
 * Row types of every table, shared by SQLite and PostgreSQL. Timestamps are ISO 8601 UTC strings with
 * millisecond precision (they sort as text on both engines); booleans are 0/1 integers; JSON is text.
 */
import type { Generated, Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';

export interface AccountsTable {
  id: string;
  name: string;
  email: string;
  company: string | null;
  billing_email: string | null;
  plan: string;
  status: string;
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

export interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  /** The first characters of the key, shown so users can tell keys apart. */
  prefix: string;
  /** Lowercase hex SHA-256 of the whole key; the key itself is never stored. */
  key_hash: string;
  /** JSON array of permission strings. */
  permissions: string;
  expires_at: string | null;
  last_used_at: string | null;
  created_at: string;
}

export interface IdempotencyKeysTable {
  account_id: string;
  key: string;
  fingerprint: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_body: string | null;
  locked_until: string;
  created_at: string;
  expires_at: string;
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
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface Database {
  accounts: AccountsTable;
  account_quotas: AccountQuotasTable;
  api_keys: ApiKeysTable;
  idempotency_keys: IdempotencyKeysTable;
  events: EventsTable;
  settings: SettingsTable;
}

/** Anything queries run on: the database itself or a transaction. */
export type Executor = Kysely<Database> | Transaction<Database>;

export type AccountRow = Selectable<AccountsTable>;
export type NewAccountRow = Insertable<AccountsTable>;
export type AccountUpdate = Updateable<AccountsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type EventRow = Selectable<EventsTable>;
