/**
 * What the API's guard (platform/http/plugins/guard.ts) asks of whatever knows the API keys (the account
 * resource's ApiKeyService implements it): who a presented key stands for, answered from memory when it
 * can be, so that the guard's hot path stays synchronous, and from the store otherwise.
 */
import type { AuthenticationFailed } from './errors.js';
import type { Principal } from './principal.js';

/** A plausible key that memory does not hold: the store decides (Authenticator.verifyFromStore). */
export class UnverifiedKey {
  constructor(readonly keyHash: string) {}
}

export interface Authenticator {
  /**
   * What memory alone says about a presented key: its principal when verified recently, a refusal when it
   * cannot be a key at all, or else an UnverifiedKey carrying the key's hash (computed once).
   */
  verifyFromMemory(presented: string): Principal | AuthenticationFailed | UnverifiedKey;
  /** The principal of a key memory could not vouch for; throws AuthenticationFailed. */
  verifyFromStore(key: UnverifiedKey): Promise<Principal>;
  /** True when the key is old enough that rotating it is recommended (the answer carries a Warning). */
  rotationDue(principal: Principal): boolean;
}
