/** How an instance looks to users: the API record (docs/design.md, "Instance record"). */

import { microsToUsd } from '../../platform/domain/money.js';
import { type InstanceType, instanceTypeNamed } from '../catalog/catalog.js';
import type { BackupSchedule } from '../volumes/backup-schedule.js';
import type { Instance } from './record.js';
import type { InstanceStatus } from './states.js';

export const LOGIN_USER = 'lambda';

/** Where to SSH in: `ssh -p PORT lambda@HOST`. */
export interface SshEndpoint {
  host: string;
  port: number;
  user: string;
}

/**
 * A driver that forwards a port of its own says where (qemu: NIMBUS_HOST and the VM's port, null until
 * the VM exists); otherwise the public address and port 22 (the simulator).
 */
export type SshEndpoints = (instanceId: string) => { host: string; port: number } | null;

export function sshEndpoint(
  instance: Pick<Instance, 'id' | 'public_ip'>,
  endpoints?: SshEndpoints,
): SshEndpoint {
  if (!endpoints) return { host: instance.public_ip, port: 22, user: LOGIN_USER };
  const forwarded = endpoints(instance.id);
  return { host: forwarded?.host ?? instance.public_ip, port: forwarded?.port ?? 22, user: LOGIN_USER };
}

export interface InstanceView {
  id: string;
  name: string;
  status: InstanceStatus;
  instance_type: string;
  region: string;
  image: string;
  ssh_keys: string[];
  public_ip: string;
  private_ip: string;
  hostname: string;
  internal_hostname: string;
  login_user: string;
  ssh: SshEndpoint;
  tags: Record<string, string>;
  user_data?: string | null;
  encryption_key_id: string | null;
  firewall_preset: string;
  monitoring: boolean;
  backup_schedule: BackupSchedule | null;
  vcpus: number;
  memory_gb: number;
  storage_gb: number;
  gpu: InstanceType['gpu'];
  price_per_hour: number;
  root_volume_id: string;
  created_at: string;
  updated_at: string;
}

export function hostnames(instance: Pick<Instance, 'id' | 'region'>, publicDomain: string) {
  return {
    hostname: `${instance.id}.${instance.region}.${publicDomain}`,
    internal_hostname: `${instance.id}.${instance.region}.internal`,
  };
}

/** `withUserData`: user data is shown on the one-instance answers, not in lists. */
export function instanceView(
  instance: Instance,
  publicDomain: string,
  withUserData: boolean,
  endpoints?: SshEndpoints,
): InstanceView {
  const type = instanceTypeNamed(instance.instance_type);
  return {
    id: instance.id,
    name: instance.name,
    status: instance.status,
    instance_type: instance.instance_type,
    region: instance.region,
    image: instance.image,
    ssh_keys: instance.ssh_key_ids,
    public_ip: instance.public_ip,
    private_ip: instance.private_ip,
    ...hostnames(instance, publicDomain),
    login_user: LOGIN_USER,
    ssh: sshEndpoint(instance, endpoints),
    tags: instance.tags,
    ...(withUserData ? { user_data: instance.user_data } : {}),
    encryption_key_id: instance.encryption_key_id,
    firewall_preset: instance.firewall_preset,
    monitoring: instance.monitoring,
    backup_schedule: instance.backup_schedule,
    vcpus: type.vcpus,
    memory_gb: type.memory_gb,
    storage_gb: type.storage_gb,
    gpu: type.gpu,
    price_per_hour: microsToUsd(type.price_per_hour_micros),
    root_volume_id: instance.root_volume_id,
    created_at: instance.created_at,
    updated_at: instance.updated_at,
  };
}
