/**
 * The SSH key record: the one declaration of its fields (the store's row: platform/store/schema.ts
 * `SshKeysTable`). The API view (view.ts: this less `account_id`) and the data of its events (events.ts,
 * picked) are derived from it, with its descriptions.
 */
import { type Static, Type } from '@sinclair/typebox';
import { Timestamp } from '../../platform/http/schemas.js';

export const SshKeyRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  // Normalised to `type base64 [comment]` when uploaded.
  public_key: Type.String({
    description: 'OpenSSH one-line form: type, base64 key data, optional comment',
  }),
  fingerprint: Type.String({ description: 'SHA256:… as `ssh-keygen -lf` prints it' }),
  created_at: Timestamp,
});
export type SshKey = Static<typeof SshKeyRecord>;
