/**
 * SSH key events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). What the record has is picked from it (record.ts).
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { SshKeyRecord } from './record.js';

const SshKeyEvent = Type.Object(
  {
    ssh_key_id: Type.String({ description: 'The SSH key' }),
    ...Type.Pick(SshKeyRecord, ['name', 'fingerprint']).properties,
  },
  { additionalProperties: false },
);

export const SSH_KEY_EVENTS = {
  'ssh_key.created': entry('An SSH key was uploaded', SshKeyEvent),
  'ssh_key.deleted': entry('An SSH key was deleted', SshKeyEvent),
};

type SshKeyEvents = typeof SSH_KEY_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends SshKeyEvents {}
}
