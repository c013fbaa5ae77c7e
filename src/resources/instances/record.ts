/** The instance as the services see it: the store's record, decoded (docs/design.md, "Instance record"). */
import type { BackupSchedule } from '../volumes/backup-schedule.js';
import type { InstanceOperation, InstanceStatus } from './states.js';

/** Timestamps are ISO 8601 UTC strings, as every record of the store carries them. */
export interface Instance {
  id: string;
  account_id: string;
  name: string;
  status: InstanceStatus;
  /** The user action in progress, null when settled. */
  operation: InstanceOperation | null;
  /** When that action was asked for. */
  operation_at: string | null;
  instance_type: string;
  region: string;
  image: string;
  ssh_key_ids: string[];
  public_ip: string;
  private_ip: string;
  tags: Record<string, string>;
  user_data: string | null;
  encryption_key_id: string | null;
  firewall_preset: string;
  monitoring: boolean;
  backup_schedule: BackupSchedule | null;
  root_volume_id: string;
  /** Bumped by every write; writers guard on it so two of them cannot both win. */
  version: number;
  created_at: string;
  updated_at: string;
}

/** What a write may change: everything but identity, placement, version and creation time. */
export type InstanceChanges = Partial<
  Omit<Instance, 'id' | 'account_id' | 'region' | 'version' | 'created_at'>
>;
