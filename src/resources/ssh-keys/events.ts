/**
 * SSH key events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). Written here until SSH keys have a TypeBox record to pick them from.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';

const SshKeyEvent = Type.Object(
  {
    ssh_key_id: Type.String({ description: 'The SSH key' }),
    name: Type.String(),
    fingerprint: Type.String(),
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
