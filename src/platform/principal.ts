import type { AccountView } from '../resources/account/view.js';
import { type Access, allows, type PermissionArea } from './domain/permissions.js';
import type { AccountStatus, Plan, RateLimitPolicy } from './domain/plans.js';
import { Forbidden } from './errors.js';

/** Who is calling: the verified API key and what its account allows. Passed to services by the HTTP layer. */
export interface Principal {
  accountId: string;
  keyId: string;
  permissions: readonly string[];
  keyCreatedAt: Date;
  keyExpiresAt: Date | null;
  plan: Plan;
  accountStatus: AccountStatus;
  rateLimit: RateLimitPolicy;
  /** The account as read when the key was verified. */
  account: AccountView;
}

/**
 * Refuses a caller whose key lacks `area:access`, in the answer every missing permission gets: the guard
 * checks a route's own permission with it, and services the further ones a request's body asks for.
 */
export function requirePermission(principal: Principal, area: PermissionArea, access: Access): void {
  if (!allows(principal.permissions, area, access)) {
    throw new Forbidden(`This API key lacks the permission ${area}:${access}`, {
      required_permission: `${area}:${access}`,
    });
  }
}
