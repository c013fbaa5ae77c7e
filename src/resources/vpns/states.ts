/**
 * The VPN state machine, as data (docs/design.md, "VPN states"). A VPN is a WireGuard gateway into the account's
 * private network of one region; the reconciler (resources/vpns/reconciler.ts) provisions and destroys it
 * through the driver. Diagram: docs/api.md, "VPNs".
 *
 *   create ─▶ provisioning ─▶ active
 *   provisioning | active | error ─delete─▶ deleting ─▶ (gone: 404)
 *   the driver keeps failing ─▶ error
 *
 * Peers are added and removed on a VPN that is provisioning or active: the VPN is held while its peers
 * change (so two adds never take one address), and its status stays as it is.
 */

import { defineStateTable, statusesExcept } from '../../platform/lifecycle/state-table.js';
import type { VPN_EVENTS } from './events.js';

export const VPN_STATUSES = ['provisioning', 'active', 'deleting', 'error'] as const;
export type VpnStatus = (typeof VPN_STATUSES)[number];

export type VpnAction = 'update' | 'add_peer' | 'remove_peer' | 'delete';

export const VPN_STATES = defineStateTable<VpnStatus, VpnAction>({
  kind: 'vpn',
  statuses: VPN_STATUSES,
  create: { status: 'provisioning', target: 'active' },
  actions: {
    update: { from: statusesExcept(VPN_STATUSES, 'deleting') },
    add_peer: { from: ['provisioning', 'active'] },
    remove_peer: { from: ['provisioning', 'active', 'error'] },
    delete: { from: ['provisioning', 'active', 'error'], to: 'deleting', target: 'gone' },
  },
});

export type VpnEventType = keyof typeof VPN_EVENTS;
