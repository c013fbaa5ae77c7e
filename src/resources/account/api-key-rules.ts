/**
 * What one API key may do to others. A key can only grant what it holds, and that covers time as well
 * as permissions: a key that expires cannot make one that lives longer (else a leaked short-lived key
 * would mint itself a permanent one). The same holds for taking away: a key may revoke only keys whose
 * permissions it holds itself (else a key with account:write could lock out the owner's `*` key),
 * except that any key may revoke itself.
 */
import { covers } from '../../platform/domain/permissions.js';

export interface KeyGrant {
  permissions: readonly string[];
  /** null: never expires. */
  expiresAt: Date | null;
}

/** The requested permissions the holder does not hold, in the order asked. */
export function permissionsBeyond(held: readonly string[], requested: readonly string[]): string[] {
  return requested.filter((permission) => !covers(held, permission));
}

/**
 * The expiry of a new key: the one asked for, by default the creator's own (which for a creator that
 * never expires is "never"); undefined when the one asked for is later than the creator's.
 */
export function grantedExpiry(creator: Date | null, requested: Date | undefined): Date | null | undefined {
  if (requested === undefined) return creator;
  if (creator !== null && requested.getTime() > creator.getTime()) return undefined;
  return requested;
}

/** The target's permissions that stop `holder` from revoking it (none: it may). */
export function revocationBlockers(
  holder: { keyId: string; permissions: readonly string[] },
  target: { id: string; permissions: readonly string[] },
): string[] {
  if (holder.keyId === target.id) return [];
  return permissionsBeyond(holder.permissions, target.permissions);
}
