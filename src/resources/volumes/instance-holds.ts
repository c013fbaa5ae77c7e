/**
 * What volumes need of the instance a volume goes on, as a port. Instances depend on volumes (an instance
 * has its volumes), not the other way round, so volumes name here the little they need and the
 * composition root (src/composition.ts) fills it with instances' own functions.
 */
import type { Executor } from '../../platform/store/schema.js';

/** The fields of an instance that placing a volume on it reads. */
export interface HeldInstance {
  id: string;
  region: string;
  status: string;
}

export interface InstanceHolds {
  /**
   * Holds the account's instance until the transaction ends (taken before the volume: the lock order),
   * or undefined when the account has no such instance.
   */
  lockForAttach(trx: Executor, accountId: string, instanceId: string): Promise<HeldInstance | undefined>;
}
