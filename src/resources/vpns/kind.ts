/**
 * VPNs as a kind of the lifecycle core: the state table, how records are read and written, what their
 * events carry; and the gateway a VPN asks the driver for (its configuration, with the private key opened
 * from its seal and every peer).
 */

import type { GatewaySpec } from '../../drivers/driver.js';
import type { EventData } from '../../platform/events/catalog.js';
import type { ResourceKind } from '../../platform/lifecycle/lifecycle.js';
import type { SealedSecret } from '../../platform/master-key.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { Executor } from '../../platform/store/schema.js';
import { vpnMeter } from '../billing/rules.js';
import { gatewayAddress, type Vpn, type VpnChanges } from './record.js';
import { VPN_STATES, type VpnAction, type VpnEventType, type VpnStatus } from './states.js';
import * as vpns from './store.js';
import { renderGatewayConfig } from './wireguard.js';

export type { VpnEventType } from './states.js';

export const VPN_KIND: ResourceKind<VpnStatus, VpnAction, Vpn, VpnChanges, VpnEventType> = {
  table: VPN_STATES,
  resource: 'vpn',
  find: vpns.findVpn,
  lock: vpns.lockAccountVpn,
  insert: vpns.insertVpn,
  update: vpns.updateVpn,
  remove: vpns.deleteVpn,
  eventData: (vpn): EventData<VpnEventType> => ({
    vpn_id: vpn.id,
    name: vpn.name,
    status: vpn.status,
    region: vpn.region,
    endpoint: `${vpn.endpoint_ip}:${vpn.endpoint_port}`,
  }),
  meter: vpnMeter,
};

/** The associated data a VPN's private key is sealed with: a seal copied to another VPN does not open. */
export const sealedKeyBinding = (vpnId: string) => `vpn:${vpnId}:server_private_key`;

/** One VPN's sealed private key, if any (the master key check: platform/master-key.ts). */
export async function anySealedVpnKey(db: Executor): Promise<SealedSecret | undefined> {
  const vpn = await vpns.anySealedKey(db);
  return vpn && { sealed: vpn.server_private_key_sealed, boundTo: sealedKeyBinding(vpn.id) };
}

/**
 * The gateway as far as inspecting or destroying it needs (no configuration): a VPN is taken down even
 * when its sealed key cannot be opened (a master key replaced, see docs/operations.md).
 */
export function bareGatewaySpec(vpn: Vpn): GatewaySpec {
  return {
    id: vpn.id,
    region: vpn.region,
    endpoint: { ip: vpn.endpoint_ip, port: vpn.endpoint_port },
    config: '',
  };
}

/** The gateway the driver runs for a VPN: its wg-quick file lists every peer the VPN has now. */
export async function gatewaySpecOf(db: Executor, box: SecretBox, vpn: Vpn): Promise<GatewaySpec> {
  const prefix = vpn.tunnel_cidr.split('/')[1];
  const peers = await vpns.peersOf(db, vpn.id);
  return {
    id: vpn.id,
    region: vpn.region,
    endpoint: { ip: vpn.endpoint_ip, port: vpn.endpoint_port },
    config: renderGatewayConfig({
      privateKey: box.open(vpn.server_private_key_sealed, sealedKeyBinding(vpn.id)),
      address: `${gatewayAddress(vpn.tunnel_cidr)}/${prefix}`,
      listenPort: vpn.endpoint_port,
      peers: peers.map((peer) => ({ publicKey: peer.public_key, address: peer.address })),
    }),
  };
}
