/** How an instance looks to users: the API record (docs/design.md, "Instance record"). */

import { type Static, Type } from '@sinclair/typebox';
import { microsToUsd } from '../../platform/domain/money.js';
import { viewOf } from '../../platform/http/view-of.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import { type Instance, InstanceRecord } from './record.js';

export const LOGIN_USER = 'lambda';

/**
 * A driver that forwards a port of its own says where (qemu: NIMBUS_HOST and the VM's port, null until
 * the VM exists); otherwise the public address and port 22 (the simulator, and qemu on OVN with a
 * public link, whose driver says null).
 */
export type SshEndpoints = (instanceId: string) => { host: string; port: number } | null;

export function sshEndpoint(
  instance: Pick<Instance, 'id' | 'public_ip' | 'private_ip'>,
  endpoints?: SshEndpoints,
): SshEndpoint {
  // An instance without a public IP is reached privately (another instance, a VPN).
  const address = instance.public_ip ?? instance.private_ip;
  if (!endpoints) return { host: address, port: 22, user: LOGIN_USER };
  const forwarded = endpoints(instance.id);
  return { host: forwarded?.host ?? address, port: forwarded?.port ?? 22, user: LOGIN_USER };
}

/** Where to SSH in; shared with the network view. */
export const SshEndpointView = Type.Object(
  {
    host: Type.String({ description: 'Host to connect to' }),
    port: Type.Integer({ description: 'TCP port of its SSH server' }),
    user: Type.String({ description: 'Always "lambda"' }),
  },
  {
    title: 'SshEndpoint',
    description:
      '`ssh -p PORT USER@HOST`. Simulated instances: the public address and port 22. Real VMs (NIMBUS_DRIVER=qemu): the Nimbus host and the port forwarded to the VM, or, on OVN with a public link, the public address and port 22',
  },
);

/** Where to SSH in: `ssh -p PORT lambda@HOST`. */
export type SshEndpoint = Static<typeof SshEndpointView>;

const instance = InstanceRecord.properties;

/** The record's fields as they are shown, and what the instance's type, names and address add. */
export const InstanceView = Type.Object(
  {
    id: instance.id,
    name: instance.name,
    status: instance.status,
    instance_type: instance.instance_type,
    region: instance.region,
    image: instance.image,
    ssh_keys: instance.ssh_key_ids,
    public_ip: instance.public_ip,
    private_ip: instance.private_ip,
    hostname: Type.String(),
    internal_hostname: Type.String(),
    login_user: Type.String({ description: 'Always "lambda"' }),
    ssh: SshEndpointView,
    tags: instance.tags,
    user_data: Type.Optional(Type.Union(instance.user_data.anyOf, { description: 'Not included in lists' })),
    encryption_key_id: instance.encryption_key_id,
    firewall_preset: instance.firewall_preset,
    monitoring: instance.monitoring,
    backup_schedule: instance.backup_schedule,
    protection: instance.protection,
    vcpus: Type.Integer(),
    memory_gb: Type.Integer(),
    storage_gb: Type.Integer(),
    gpu: Type.Union([
      Type.Object({ count: Type.Integer(), model: Type.String(), memory_gb: Type.Integer() }),
      Type.Null(),
    ]),
    price_per_hour: Type.Number({ description: 'USD per hour while running' }),
    root_volume_id: instance.root_volume_id,
    volumes: Type.Optional(
      Type.Array(
        Type.Object({
          id: Type.String(),
          name: Type.String(),
          device_name: Type.Union([Type.String(), Type.Null()]),
          size_gb: Type.Integer(),
          kind: Type.String({ description: '`root` or `data`' }),
          status: Type.String(),
        }),
        {
          description:
            'Only on GET /v1/instances/{id}: the volumes on the instance with their devices, root (`/dev/vda`) first',
        },
      ),
    ),
    created_at: instance.created_at,
    updated_at: instance.updated_at,
  },
  { $id: 'Instance', title: 'Instance' },
);
export type InstanceView = Static<typeof InstanceView>;

const recordFields = viewOf(InstanceView);

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
  const { user_data, ...shown } = recordFields(instance);
  return {
    ...shown,
    ssh_keys: instance.ssh_key_ids,
    ...hostnames(instance, publicDomain),
    login_user: LOGIN_USER,
    ssh: sshEndpoint(instance, endpoints),
    ...(withUserData ? { user_data } : {}),
    vcpus: type.vcpus,
    memory_gb: type.memory_gb,
    storage_gb: type.storage_gb,
    gpu: type.gpu,
    price_per_hour: microsToUsd(type.price_per_hour_micros),
  };
}
