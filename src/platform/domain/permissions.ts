/**
 * API key permissions: `<area>:read` or `<area>:write` per area, or `*` for everything.
 * `write` implies `read`. A key may only grant permissions it holds itself.
 */

export const PERMISSION_AREAS = [
  'instances',
  'volumes',
  'snapshots',
  'networking',
  'monitoring',
  'billing',
  'account',
  'webhooks',
] as const;
export type PermissionArea = (typeof PERMISSION_AREAS)[number];
export type Access = 'read' | 'write';

export const ALL_PERMISSIONS = [
  '*',
  ...PERMISSION_AREAS.flatMap((area) => [`${area}:read`, `${area}:write`]),
] as readonly string[];

export function isKnownPermission(permission: string): boolean {
  return ALL_PERMISSIONS.includes(permission);
}

export function allows(held: readonly string[], area: PermissionArea, access: Access): boolean {
  if (held.includes('*')) return true;
  if (held.includes(`${area}:write`)) return true;
  return access === 'read' && held.includes(`${area}:read`);
}

/** Whether a key holding `held` may hand out `requested`. */
export function covers(held: readonly string[], requested: string): boolean {
  if (held.includes('*')) return true;
  if (requested === '*') return false;
  const [area, access] = requested.split(':') as [PermissionArea, Access];
  return allows(held, area, access);
}

/** Sorted, de-duplicated, and with `read` dropped where `write` of the same area is present. */
export function normalizePermissions(requested: readonly string[]): string[] {
  if (requested.includes('*')) return ['*'];
  const unique = new Set(requested);
  return [...unique]
    .filter((p) => !(p.endsWith(':read') && unique.has(p.replace(/:read$/, ':write'))))
    .sort();
}
