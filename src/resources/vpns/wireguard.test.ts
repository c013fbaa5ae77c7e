import { describe, expect, it } from 'vitest';
import { wgPubkey, wgQuickStrip } from '../../../test/helpers/wireguard.js';
import {
  generateKeyPair,
  isWireGuardKey,
  PRIVATE_KEY_PLACEHOLDER,
  publicKeyOf,
  renderClientConfig,
  renderGatewayConfig,
} from './wireguard.js';

describe('WireGuard keys and configuration files (checked by the real wg tools)', () => {
  it('generates key pairs wg agrees with, and derives public keys as wg pubkey does', () => {
    for (let i = 0; i < 5; i++) {
      const pair = generateKeyPair();
      expect(isWireGuardKey(pair.privateKey)).toBe(true);
      expect(isWireGuardKey(pair.publicKey)).toBe(true);
      expect(wgPubkey(pair.privateKey)).toBe(pair.publicKey);
      expect(publicKeyOf(pair.privateKey)).toBe(pair.publicKey);
    }
  });

  it('tells keys from other text', () => {
    const { publicKey } = generateKeyPair();
    expect(isWireGuardKey(publicKey.slice(0, -2))).toBe(false);
    expect(isWireGuardKey(`${publicKey}=`)).toBe(false);
    expect(isWireGuardKey(Buffer.alloc(32).toString('base64'))).toBe(false);
    expect(isWireGuardKey(Buffer.alloc(32, 1).toString('base64url'))).toBe(false);
    expect(isWireGuardKey(Buffer.alloc(31, 1).toString('base64'))).toBe(false);
    // The last character may not carry bits past the 32nd byte.
    expect(isWireGuardKey(`${publicKey.slice(0, 42)}B=`)).toBe(false);
  });

  it('renders a client file wg-quick accepts, and the gateway file the driver loads', () => {
    const gateway = generateKeyPair();
    const client = generateKeyPair();
    const clientFile = renderClientConfig({
      privateKey: client.privateKey,
      address: '100.96.0.2',
      dns: '100.96.0.1',
      serverPublicKey: gateway.publicKey,
      endpoint: { ip: '203.0.113.7', port: 51820 },
      allowedIps: ['100.96.0.0/24', '10.10.0.0/16'],
      keepaliveSeconds: 25,
    });
    const stripped = wgQuickStrip(clientFile);
    expect(stripped).toContain(`PrivateKey = ${client.privateKey}`);
    expect(stripped).toContain('Endpoint = 203.0.113.7:51820');
    expect(stripped).not.toContain('DNS');

    const gatewayFile = renderGatewayConfig({
      privateKey: gateway.privateKey,
      address: '100.96.0.1/24',
      listenPort: 51820,
      peers: [
        { publicKey: client.publicKey, address: '100.96.0.2' },
        { publicKey: generateKeyPair().publicKey, address: '100.96.0.3' },
      ],
    });
    const gatewayStripped = wgQuickStrip(gatewayFile);
    expect(gatewayStripped).toContain('ListenPort = 51820');
    expect(gatewayStripped.match(/\[Peer\]/g)).toHaveLength(2);
    expect(wgPubkey(gateway.privateKey)).toBe(gateway.publicKey);
  });

  it('a client file without its private key names the placeholder, and filled in, wg-quick accepts it', () => {
    const file = renderClientConfig({
      privateKey: null,
      address: '100.96.0.2',
      dns: '100.96.0.1',
      serverPublicKey: generateKeyPair().publicKey,
      endpoint: { ip: '203.0.113.7', port: 51820 },
      allowedIps: ['10.10.0.0/16'],
      keepaliveSeconds: 25,
    });
    expect(file).toContain(`PrivateKey = ${PRIVATE_KEY_PLACEHOLDER}`);
    const own = generateKeyPair();
    expect(wgQuickStrip(file.replace(PRIVATE_KEY_PLACEHOLDER, own.privateKey))).toContain(own.privateKey);
  });
});
