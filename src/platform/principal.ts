import { type Access, allows, type PermissionArea } from './domain/permissions.js';
import type { AccountStatus, Plan, RateLimitPolicy } from './domain/plans.js';
import { Forbidden } from './errors.js';

/**
 * Who is calling: the verified API key and what its account allows. Passed to services by the HTTP layer.
 * These are the fields the platform reads; a resource adds what it keeps of the caller by declaration
 * merging, as Fastify's decorations do (resources/account/view.ts: the account as read with the key).
 */
export interface Principal {
  accountId: string;
  keyId: string;
  permissions: readonly string[];
  keyCreatedAt: Date;
  keyExpiresAt: Date | null;
  plan: Plan;
  accountStatus: AccountStatus;
  rateLimit: RateLimitPolicy;
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
