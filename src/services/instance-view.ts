/** How an instance row looks to users (the API record of DESIGN.md §4) and to the driver (its spec). */
import { INSTANCE_TYPES, type InstanceType } from '../domain/catalog.js';
import type { InstanceStatus } from '../domain/instance-states.js';
import { microsToUsd } from '../domain/money.js';
import type { MachineSpec } from '../drivers/driver.js';
import type { InstanceRow } from '../store/schema.js';

export const LOGIN_USER = 'lambda';

export interface BackupSchedule {
  frequency: 'hourly' | 'daily' | 'weekly';
  retention: number;
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

const TYPES = new Map(INSTANCE_TYPES.map((t) => [t.name, t]));

export function typeOf(name: string): InstanceType {
  const found = TYPES.get(name);
  if (!found) throw new Error(`unknown instance type ${name}`);
  return found;
}

export function hostnames(row: Pick<InstanceRow, 'id' | 'region'>, publicDomain: string) {
  return {
    hostname: `${row.id}.${row.region}.${publicDomain}`,
    internal_hostname: `${row.id}.${row.region}.internal`,
  };
}

/** `withUserData`: user data is shown on the one-instance answers, not in lists. */
export function instanceView(row: InstanceRow, publicDomain: string, withUserData: boolean): InstanceView {
  const type = typeOf(row.instance_type);
  return {
    id: row.id,
    name: row.name,
    status: row.status as InstanceStatus,
    instance_type: row.instance_type,
    region: row.region,
    image: row.image,
    ssh_keys: JSON.parse(row.ssh_key_ids) as string[],
    public_ip: row.public_ip,
    private_ip: row.private_ip,
    ...hostnames(row, publicDomain),
    login_user: LOGIN_USER,
    tags: JSON.parse(row.tags) as Record<string, string>,
    ...(withUserData ? { user_data: row.user_data } : {}),
    encryption_key_id: row.encryption_key_id,
    firewall_preset: row.firewall_preset,
    monitoring: row.monitoring === 1,
    backup_schedule: row.backup_schedule ? (JSON.parse(row.backup_schedule) as BackupSchedule) : null,
    vcpus: type.vcpus,
    memory_gb: type.memory_gb,
    storage_gb: type.storage_gb,
    gpu: type.gpu,
    price_per_hour: microsToUsd(type.price_per_hour_micros),
    root_volume_id: row.root_volume_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function machineSpec(row: InstanceRow): MachineSpec {
  return {
    id: row.id,
    instanceType: typeOf(row.instance_type),
    image: row.image,
    region: row.region,
    userData: row.user_data,
    tags: JSON.parse(row.tags) as Record<string, string>,
  };
}
