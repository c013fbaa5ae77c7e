/**
 * The public IP as the services see it (the store's record, decoded), and what a new one looks like. An
 * address is held by its account until released; `instance_id` is the instance it is assigned to now,
 * which also holds it in `instances.public_ip` (written in the same transaction).
 */
import { type Static, Type } from '@sinclair/typebox';
import { type Protected, Protection, UNPROTECTED } from '../../platform/domain/protection.js';
import { Nullable, Timestamp } from '../../platform/http/schemas.js';

export const PUBLIC_IP_SORTS = ['created_at', 'name', 'address'] as const;
export type PublicIpSort = (typeof PUBLIC_IP_SORTS)[number];

/** How long a released address stays out of its pool, so it never reaches a stranger while DNS still names it. */
export const RELEASED_ADDRESS_COOLDOWN_MS = 24 * 3600 * 1000;

export const PublicIpRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  region: Type.String(),
  address: Type.String({ description: 'The IPv4 address, from the region’s public pool' }),
  instance_id: Nullable(Type.String({ description: 'The instance it is assigned to; null: unassigned' })),
  auto_delete: Type.Boolean({
    description:
      'Released with its instance when the instance is deleted (the address made with an instance)',
  }),
  tags: Type.Record(Type.String(), Type.String()),
  protection: Protection,
  assigned_at: Nullable(Timestamp),
  /** Bumped by every write; writers guard on it so two of them cannot both win. */
  version: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type PublicIp = Static<typeof PublicIpRecord>;

/** The public IP as a refused delete names it (platform/domain/protection.ts). */
export const protectedPublicIp = (id: string): Protected => ({
  label: 'Public IP',
  resource: 'public_ip',
  id,
  path: '/v1/public-ips',
});
export type PublicIpChanges = Partial<
  Omit<PublicIp, 'id' | 'account_id' | 'region' | 'address' | 'version' | 'created_at'>
>;

export function newPublicIp(input: {
  id: string;
  accountId: string;
  name: string;
  region: string;
  address: string;
  instanceId: string | null;
  autoDelete: boolean;
  tags: Record<string, string>;
  protection?: PublicIp['protection'] | undefined;
  at: string;
}): PublicIp {
  return {
    id: input.id,
    account_id: input.accountId,
    name: input.name,
    region: input.region,
    address: input.address,
    instance_id: input.instanceId,
    auto_delete: input.autoDelete,
    tags: input.tags,
    protection: input.protection ?? UNPROTECTED,
    assigned_at: input.instanceId === null ? null : input.at,
    version: 1,
    created_at: input.at,
    updated_at: input.at,
  };
}

/** The name of the address made with an instance: the instance's, marked (names are at most 64). */
export const addressNameFor = (instanceName: string) => `${instanceName.slice(0, 61)}-ip`;
