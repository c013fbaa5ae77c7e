/** How an API key looks to users: its record, less its account and its hash (docs/api.md, API keys). */
import { type Static, Type } from '@sinclair/typebox';
import { viewOf } from '../../platform/http/view-of.js';
import { ApiKeyRecord } from './api-key-record.js';

export const ApiKeyView = Type.Object(Type.Omit(ApiKeyRecord, ['account_id', 'key_hash']).properties, {
  $id: 'ApiKey',
  title: 'ApiKey',
});
export type ApiKeyView = Static<typeof ApiKeyView>;
export const apiKeyView = viewOf(ApiKeyView);
