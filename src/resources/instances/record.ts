/** The instance as the services see it: the store's record, decoded (docs/design.md, "Instance record"). */
import { type Static, Type } from '@sinclair/typebox';
import { type Protected, Protection } from '../../platform/domain/protection.js';
import { Nullable, StringEnum, Timestamp } from '../../platform/http/schemas.js';
import type { BackupSchedule } from '../volumes/backup-schedule.js';
import { INSTANCE_STATUSES, type InstanceOperation } from './states.js';

/**
 * The instance record: the one declaration of its fields. The store's columns and decoding
 * (resources/instances/store.ts) and the fields the API view takes from it (resources/instances/view.ts)
 * follow from it. Timestamps are ISO 8601 UTC strings, as every record of the store carries them.
 */
export const InstanceRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  status: StringEnum(INSTANCE_STATUSES),
  /** The user action in progress, null when settled. */
  operation: Nullable(Type.Unsafe<InstanceOperation>(Type.String())),
  /** When that action was asked for. */
  operation_at: Nullable(Timestamp),
  instance_type: Type.String(),
  region: Type.String(),
  image: Type.String(),
  ssh_key_ids: Type.Array(Type.String(), { description: 'Ids of the SSH keys installed for the login user' }),
  public_ip: Nullable(
    Type.String({
      description: 'The public IPv4 address assigned now (a public IP, `/v1/public-ips`); null: none',
    }),
  ),
  private_ip: Type.String({ description: "IPv4 address on the account's private network in the region" }),
  tags: Type.Record(Type.String(), Type.String()),
  user_data: Nullable(Type.String()),
  encryption_key_id: Nullable(Type.String()),
  firewall_preset: Type.String(),
  monitoring: Type.Boolean(),
  // The frequencies are checked where a schedule comes in (volumes/routes.ts `BackupSchedule`).
  backup_schedule: Nullable(
    Type.Unsafe<BackupSchedule>(Type.Object({ frequency: Type.String(), retention: Type.Integer() })),
  ),
  root_volume_id: Type.String(),
  protection: Protection,
  /** Bumped by every write; writers guard on it so two of them cannot both win. */
  version: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Instance = Static<typeof InstanceRecord>;

/** The instance as a refused delete names it (platform/domain/protection.ts). */
export const protectedInstance = (id: string): Protected => ({
  label: 'Instance',
  resource: 'instance',
  id,
  path: '/v1/instances',
});

/** What a write may change: everything but identity, placement, version and creation time. */
export type InstanceChanges = Partial<
  Omit<Instance, 'id' | 'account_id' | 'region' | 'version' | 'created_at'>
>;
