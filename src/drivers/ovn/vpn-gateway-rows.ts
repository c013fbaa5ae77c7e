/**
 * A VPN gateway's place in its VPC's OVN rows (issue 32, item 2). The gateway (vpn-gateways.ts runs it)
 * is a network namespace whose `eth0` is a logical switch port of the VPC, like an instance's NIC. Per
 * gateway, beside the VPC's other rows (topology.ts):
 *
 * - a logical switch port named by the VPN id, holding the gateway's address, with port security that
 *   lets it send from and receive for its tunnel network too (the peers' packets pass through it);
 * - a static route on the VPC's router: the tunnel network via the gateway's address, so an instance's
 *   answer to a peer goes back into the tunnel;
 * - with a public side (uplink.ts), a `dnat_and_snat` of the VPN's public endpoint to the gateway's
 *   address, so peers on the public link reach its UDP port and its answers leave as the endpoint.
 *
 * The gateway's address is link-local, on the network the router already holds for the host port
 * (vpcs.ts HOST_PORT: 169.254.0.1/16), not in the VPC's private block: that block's addresses are the
 * instances' (the addresses resource hands them out), and the link-local one follows from the VPN id
 * alone, so the driver that runs the gateway and the reconcile that writes its rows agree on it without
 * a column of the store.
 */
import { createHash } from 'node:crypto';
import { macAddressFor } from '../../resources/addresses/addresses.js';
import type { Row } from './topology.js';

/** A VPN gateway of a VPC, as its rows need it. */
export interface VpcGateway {
  /** The VPN id: the logical port's name and the gateway's iface-id. */
  vpnId: string;
  /** The VPN's tunnel network (its peers' addresses), routed via the gateway. */
  tunnelCidr: string;
  /** The VPN's public endpoint address; null: no NAT (a VPC without a public side). */
  publicIp: string | null;
}

/** The router's address on the link-local network the gateways share with the host port. */
export const GATEWAY_ROUTER_IP = '169.254.0.1';
export const GATEWAY_PREFIX = 16;

/**
 * The gateway's address: 169.254.<1..254>.<1..254> from a hash of the VPN id. 169.254.0.x (the router's)
 * and 169.254.169.x (the host port's 169.254.169.254) are never chosen; two VPNs of one VPC meet on one
 * address with a chance of about one in 64,000.
 */
export function gatewayIp(vpnId: string): string {
  const digest = createHash('sha256').update(`vpn-gateway/${vpnId}`).digest();
  let third = 1 + (digest[0]! % 254);
  if (third === 169) third = 170;
  const fourth = 1 + (digest[1]! % 254);
  return `169.254.${third}.${fourth}`;
}

/** The gateway port's MAC (the locally administered range every Nimbus MAC is in). */
export function gatewayMac(vpnId: string): string {
  return macAddressFor(`${vpnId}/gateway`);
}

/** The row keys of one gateway (unique among Nimbus's rows: VPN ids are). */
export function gatewayNames(vpnId: string) {
  return { port: vpnId, route: `${vpnId}-route`, nat: `${vpnId}-nat` };
}

/** The gateways' rows, and what the VPC's switch and router rows refer to. */
export function gatewayRows(
  gateways: readonly VpcGateway[],
  withNat: boolean,
  ids: (rowKey: string, more?: Record<string, string>) => Record<string, string>,
): { rows: Row[]; switchPorts: string[]; routes: string[]; nats: string[] } {
  const rows: Row[] = [];
  const sorted = [...gateways].sort((a, b) => (a.vpnId < b.vpnId ? -1 : a.vpnId > b.vpnId ? 1 : 0));
  for (const gateway of sorted) {
    const names = gatewayNames(gateway.vpnId);
    const ip = gatewayIp(gateway.vpnId);
    const mac = gatewayMac(gateway.vpnId);
    const mark = { 'nimbus:vpn': gateway.vpnId };
    rows.push(
      {
        table: 'Logical_Switch_Port',
        key: names.port,
        columns: {
          name: names.port,
          type: '',
          addresses: [`${mac} ${ip}`],
          // The peers' packets go in and out of this port with their own tunnel addresses.
          port_security: [`${mac} ${ip} ${gateway.tunnelCidr}`],
          options: {},
          dhcpv4_options: { refs: [] },
          external_ids: ids(names.port, mark),
        },
      },
      {
        table: 'Logical_Router_Static_Route',
        key: names.route,
        columns: { ip_prefix: gateway.tunnelCidr, nexthop: ip, external_ids: ids(names.route, mark) },
      },
    );
    if (withNat && gateway.publicIp !== null) {
      rows.push({
        table: 'NAT',
        key: names.nat,
        columns: {
          type: 'dnat_and_snat',
          external_ip: gateway.publicIp,
          logical_ip: ip,
          external_ids: ids(names.nat, mark),
        },
      });
    }
  }
  return {
    rows,
    switchPorts: sorted.map((g) => gatewayNames(g.vpnId).port),
    routes: sorted.map((g) => gatewayNames(g.vpnId).route),
    nats: rows.filter((row) => row.table === 'NAT').map((row) => row.key),
  };
}
