/**
 * What public IPs need of the instance an address is assigned to, as a port. Instances depend on public
 * IPs (an instance is made with its address), not the other way round, so public IPs name here the
 * little they need and the composition root (src/composition.ts) fills it with instances' own functions.
 */
import type { Executor } from '../../platform/store/schema.js';

/** The fields of an instance that assigning an address to it reads. */
export interface AddressedInstance {
  id: string;
  region: string;
  status: string;
  public_ip: string | null;
}

export interface InstanceAddressing {
  /**
   * Holds the account's instance until the transaction ends (taken before the address: the lock order
   * an instance's delete takes them in too), or undefined when the account has no such instance.
   */
  lockForAddress(
    trx: Executor,
    accountId: string,
    instanceId: string,
  ): Promise<AddressedInstance | undefined>;
  /** Writes the instance's current address (null: none), in the assignment's transaction. */
  setPublicIp(trx: Executor, instanceId: string, address: string | null): Promise<void>;
}
