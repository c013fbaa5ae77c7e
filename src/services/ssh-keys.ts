/** SSH keys: OpenSSH public keys an account uploads and names on instance create. (Being written.) */
import type { Clock } from '../domain/clock.js';
import type { Store } from '../store/db.js';
import type { Executor } from '../store/schema.js';

export class SshKeyService {
  constructor(
    readonly store: Store,
    readonly clock: Clock,
  ) {}

  /** Ids of the account's keys named by id or name, in the order given; unknown ones are 400. */
  async resolve(_db: Executor, _accountId: string, refs: readonly string[]): Promise<string[]> {
    return [...refs];
  }
}
