import type { AccountStatus, Plan, RateLimitPolicy } from '../domain/plans.js';
import type { AccountView } from './account-view.js';

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
