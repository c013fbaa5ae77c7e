/**
 * VPN events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). What the record has is picked from it; peer events add the peer.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { VpnRecord } from './record.js';

const VpnEvent = Type.Object({
  vpn_id: Type.String({ description: 'The VPN' }),
  ...Type.Pick(VpnRecord, ['name']).properties,
  status: Type.String({ description: 'The VPN status after the change (`deleted` once gone)' }),
  region: Type.Optional(VpnRecord.properties.region),
  endpoint: Type.Optional(Type.String({ description: 'The gateway, `<public IPv4>:<port>`' })),
  peer_id: Type.Optional(Type.String({ description: 'vpn.peer_added, vpn.peer_removed: the peer' })),
  peer_name: Type.Optional(Type.String()),
  peer_address: Type.Optional(Type.String({ description: "The peer's tunnel address" })),
  peer_public_key: Type.Optional(Type.String()),
});

export const VPN_EVENTS = {
  'vpn.created': entry('A VPN was created; it is provisioning', VpnEvent),
  'vpn.active': entry('A VPN is active', VpnEvent),
  'vpn.peer_added': entry('A peer was added to a VPN', VpnEvent),
  'vpn.peer_removed': entry('A peer was removed from a VPN', VpnEvent),
  'vpn.deleted': entry('A VPN is gone', VpnEvent),
};

type VpnEvents = typeof VPN_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends VpnEvents {}
}
