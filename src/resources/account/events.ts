/**
 * API key events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). Written here until API keys have a TypeBox record to pick them from.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';

const ApiKeyCreated = Type.Object(
  {
    api_key_id: Type.String({ description: 'The API key' }),
    name: Type.String(),
    permissions: Type.Array(Type.String()),
  },
  { additionalProperties: false },
);
const ApiKeyDeleted = Type.Object(
  { api_key_id: Type.String({ description: 'The API key' }), name: Type.String() },
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
