/**
 * API key events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). What the record has is picked from it (api-key-record.ts).
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { ApiKeyRecord } from './api-key-record.js';

const KeyId = { api_key_id: Type.String({ description: 'The API key' }) };

const ApiKeyCreated = Type.Object(
  { ...KeyId, ...Type.Pick(ApiKeyRecord, ['name', 'permissions']).properties },
  { additionalProperties: false },
);
const ApiKeyDeleted = Type.Object(
  { ...KeyId, ...Type.Pick(ApiKeyRecord, ['name']).properties },
  { additionalProperties: false },
);

export const API_KEY_EVENTS = {
  'api_key.created': entry('An API key was created', ApiKeyCreated),
  'api_key.deleted': entry('An API key was deleted', ApiKeyDeleted),
};

type ApiKeyEvents = typeof API_KEY_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends ApiKeyEvents {}
}
