/**
 * The API key record: the one declaration of its fields, as the services see them (the store's row,
 * its permissions decoded: api-key-store.ts). The API view (api-key-view.ts: this less what stays in the
 * server) and the data of its events (events.ts, picked) are derived from it, with its descriptions.
 */
import { type Static, Type } from '@sinclair/typebox';
import { Timestamp } from '../../platform/http/schemas.js';

export const ApiKeyRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
  /** Lowercase hex SHA-256 of the whole key; the key itself is never stored. */
  key_hash: Type.String(),
  permissions: Type.Array(Type.String()),
  expires_at: Type.Union([Timestamp, Type.Null()]),
  last_used_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
});

/** An API key as services see it: its permissions decoded. */
export type ApiKey = Static<typeof ApiKeyRecord>;
