import { describe, expect, it } from 'vitest';
import { renderGatewayConfig } from '../../resources/vpns/wireguard.js';
import { gatewayIp, gatewayRows } from './vpn-gateway-rows.js';
import { canonicalGatewayConfig, parseDump, parseGatewayConfig, wgConfigOf } from './vpn-gateways.js';

const KEY = 'yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=';
const PEER_A = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
const PEER_B = 'TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=';

describe('a gateway configuration', () => {
  const text = renderGatewayConfig({
    privateKey: KEY,
    address: '100.96.0.1/24',
    listenPort: 51820,
    peers: [
      { publicKey: PEER_A, address: '100.96.0.2' },
      { publicKey: PEER_B, address: '100.96.0.3' },
    ],
  });

  it('reads back what renderGatewayConfig writes, and gives wg the file without wg-quick lines', () => {
    const config = parseGatewayConfig(text);
    expect(config).toEqual({
      privateKey: KEY,
      address: '100.96.0.1/24',
      listenPort: 51820,
      peers: [
        { publicKey: PEER_A, allowedIps: ['100.96.0.2/32'] },
        { publicKey: PEER_B, allowedIps: ['100.96.0.3/32'] },
      ],
    });
    expect(wgConfigOf(config)).not.toContain('Address');
    expect(wgConfigOf(config)).toContain(`PublicKey = ${PEER_B}\nAllowedIPs = 100.96.0.3/32`);
  });

  it('compares equal to what the device runs whatever the order of its peers', () => {
    const dump = [
      [KEY, 'public', '51820', 'off'],
      [PEER_B, '(none)', '203.0.113.1:40000', '100.96.0.3/32', '1700000000', '1200', '3400', '25'],
      [PEER_A, '(none)', '(none)', '100.96.0.2/32', '0', '0', '0', 'off'],
    ]
      .map((fields) => fields.join('\t'))
      .join('\n');
    const running = parseDump(dump);
    expect(running.peers[0]).toMatchObject({ latestHandshake: 1_700_000_000, rxBytes: 1200, txBytes: 3400 });
    expect(
      canonicalGatewayConfig({
        privateKey: running.privateKey,
        address: '100.96.0.1/24',
        listenPort: running.listenPort,
        peers: running.peers,
      }),
    ).toBe(canonicalGatewayConfig(parseGatewayConfig(text)));
  });

  it('refuses a configuration without a key, address or port', () => {
    expect(() => parseGatewayConfig('[Interface]\nListenPort = 51820\n')).toThrow(/PrivateKey/);
  });
});

describe("a gateway's rows", () => {
  const ids = (key: string) => ({ 'nimbus:key': key });

  it('a link-local address clear of the router and the host port, the same for the same VPN', () => {
    for (const id of ['vpn_a', 'vpn_b', 'vpn_c', 'vpn_d']) {
      const ip = gatewayIp(id);
      expect(ip).toMatch(/^169\.254\.\d+\.\d+$/);
      expect(ip.split('.')[2]).not.toBe('0');
      expect(ip.split('.')[2]).not.toBe('169');
      expect(gatewayIp(id)).toBe(ip);
    }
  });

  it('a port passing the tunnel, a route to it, and a NAT only with a public side', () => {
    const gateway = { vpnId: 'vpn_a', tunnelCidr: '100.96.0.0/24', publicIp: '203.0.113.40' };
    const withNat = gatewayRows([gateway], true, ids);
    expect(withNat.switchPorts).toEqual(['vpn_a']);
    expect(withNat.routes).toEqual(['vpn_a-route']);
    expect(withNat.nats).toEqual(['vpn_a-nat']);
    const port = withNat.rows.find((row) => row.table === 'Logical_Switch_Port')!;
    expect((port.columns.port_security as string[])[0]).toMatch(/ 169\.254\.\d+\.\d+ 100\.96\.0\.0\/24$/);
    const nat = withNat.rows.find((row) => row.table === 'NAT')!;
    expect(nat.columns).toMatchObject({ type: 'dnat_and_snat', external_ip: '203.0.113.40' });
    expect(gatewayRows([gateway], false, ids).nats).toEqual([]);
  });
});
