/**
 * The VPN reconciler: decides the one step that moves a VPN's gateway towards what the record says. The
 * lifecycle core runs it as the `vpn` job and carries out what it returns.
 *
 * Each step reads where the gateway is (`inspectGateway`), then asks the driver for the one thing that
 * moves it on (provision, load the current peers, destroy) and looks again, or returns the write that
 * records where it got (with its event), or the time its change should settle. The configuration the
 * gateway runs is compared by digest with the one the VPN's peers make now, so a peer added or removed
 * (which enqueues this job) reaches the gateway, also after a crash. Driver calls are idempotent and each
 * step is decided from what is found, so a run cut short (kill -9) is simply run again.
 */

import type { ComputeDriver, GatewaySpec, GatewayState } from '../../drivers/driver.js';
import type { Reconciler, Step } from '../../platform/lifecycle/lifecycle.js';
import { bareGatewaySpec, type VpnEventType } from './kind.js';
import type { Vpn, VpnChanges } from './record.js';
import type { VpnStatus } from './states.js';
import { configDigest } from './wireguard.js';

type VpnStep = Step<VpnStatus, VpnChanges, VpnEventType>;

const AGAIN: VpnStep = { next: 'again' };
const DONE: VpnStep = { next: 'done' };
const waitFor = (gateway: GatewayState): VpnStep => ({ next: 'wait', until: gateway.settlesAt });

export class VpnReconciler implements Reconciler<VpnStatus, Vpn, VpnChanges, VpnEventType> {
  constructor(
    private readonly driver: ComputeDriver,
    /** The gateway the VPN should have now (its configuration with the current peers). */
    private readonly specOf: (vpn: Vpn) => Promise<GatewaySpec>,
  ) {}

  /** The driver kept failing: a VPN that was coming up goes to error (it can then be deleted). */
  giveUp(vpn: Vpn): VpnStep | null {
    if (vpn.status !== 'provisioning') return null;
    return { next: 'advance', changes: { status: 'error' } };
  }

  async step(vpn: Vpn): Promise<VpnStep> {
    if (vpn.status === 'deleting') return this.takeDown(vpn);
    if (vpn.status !== 'provisioning' && vpn.status !== 'active') return DONE;
    const spec = await this.specOf(vpn);
    const gateway = await this.driver.inspectGateway(spec);
    const stale = gateway.configDigest !== configDigest(spec.config);

    switch (vpn.status) {
      case 'provisioning':
        switch (gateway.state) {
          case 'absent':
            await this.driver.provisionGateway(spec);
            return AGAIN;
          case 'provisioning':
            return waitFor(gateway);
          case 'active':
            if (stale) {
              await this.driver.configureGateway(spec);
              return AGAIN;
            }
            return { next: 'settle', changes: { status: 'active' }, event: { type: 'vpn.active' } };
          default:
            throw new Error(`gateway ${vpn.id} is ${gateway.state} while its VPN is provisioning`);
        }

      case 'active':
        // Peers changed: the running gateway loads the configuration they make now.
        if (gateway.state === 'active' && stale) {
          await this.driver.configureGateway(spec);
          return AGAIN;
        }
        return DONE;

      default:
        return DONE;
    }
  }

  /** Deleting needs no configuration (nor the sealed key): inspect and destroy by identity. */
  private async takeDown(vpn: Vpn): Promise<VpnStep> {
    const spec = bareGatewaySpec(vpn);
    const gateway = await this.driver.inspectGateway(spec);
    switch (gateway.state) {
      case 'absent':
        return { next: 'remove', event: { type: 'vpn.deleted', data: { status: 'deleted' } } };
      case 'deleting':
        return waitFor(gateway);
      default:
        await this.driver.destroyGateway(spec);
        return AGAIN;
    }
  }
}
