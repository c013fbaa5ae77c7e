/** How an SSH key looks to users: its record, less the account it belongs to (docs/api.md, SSH keys). */
import { type Static, Type } from '@sinclair/typebox';
import { viewOf } from '../../platform/http/view-of.js';
import { SshKeyRecord } from './record.js';

export const SshKeyView = Type.Object(Type.Omit(SshKeyRecord, ['account_id']).properties, {
  $id: 'SshKey',
  title: 'SshKey',
});
export type SshKeyView = Static<typeof SshKeyView>;
export const sshKeyView = viewOf(SshKeyView);
