/**
 * WireGuard keys and configuration text. Keys are X25519, written as WireGuard writes them: the raw 32
 * bytes in standard base64 (44 characters ending in `=`). Configuration files are what `wg-quick` reads:
 * a client's (`[Interface]` with its key, address and resolver, one `[Peer]`: the gateway) and the
 * gateway's own (its key and port, one `[Peer]` per client), which is what a driver loads.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';

export interface WireGuardKeyPair {
  privateKey: string;
  publicKey: string;
}

/** Standard base64 of exactly 32 bytes: what `wg genkey` and `wg pubkey` print. */
export const WIREGUARD_KEY_PATTERN = '^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$';
const KEY = new RegExp(WIREGUARD_KEY_PATTERN);

/** The DER header of a PKCS #8 X25519 private key (RFC 8410); the raw 32 bytes follow it. */
const PKCS8_X25519_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');

const rawOf = (key: KeyObject, part: 'x' | 'd'): string =>
  Buffer.from(key.export({ format: 'jwk' })[part] as string, 'base64url').toString('base64');

export function generateKeyPair(): WireGuardKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  return { privateKey: rawOf(privateKey, 'd'), publicKey: rawOf(publicKey, 'x') };
}

/** The public key of a private key, as `wg pubkey` computes it. */
export function publicKeyOf(privateKey: string): string {
  const der = Buffer.concat([PKCS8_X25519_PREFIX, Buffer.from(privateKey, 'base64')]);
  return rawOf(createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })), 'x');
}

/** A well-formed key: 32 bytes of base64, not all zero (WireGuard refuses the zero key). */
export function isWireGuardKey(text: string): boolean {
  return KEY.test(text) && Buffer.from(text, 'base64').some((byte) => byte !== 0);
}

/** Stands where a client's private key goes when the server does not have it. */
export const PRIVATE_KEY_PLACEHOLDER = '<your private key: wg genkey>';

export interface ClientConfig {
  /** The client's private key, or null for the placeholder. */
  privateKey: string | null;
  /** The client's tunnel address (a /32). */
  address: string;
  dns: string;
  serverPublicKey: string;
  endpoint: { ip: string; port: number };
  allowedIps: readonly string[];
  keepaliveSeconds: number;
}

/** A client's wg-quick file. */
export function renderClientConfig(config: ClientConfig): string {
  return [
    '[Interface]',
    `PrivateKey = ${config.privateKey ?? PRIVATE_KEY_PLACEHOLDER}`,
    `Address = ${config.address}/32`,
    `DNS = ${config.dns}`,
    '',
    '[Peer]',
    `PublicKey = ${config.serverPublicKey}`,
    `Endpoint = ${config.endpoint.ip}:${config.endpoint.port}`,
    `AllowedIPs = ${config.allowedIps.join(', ')}`,
    `PersistentKeepalive = ${config.keepaliveSeconds}`,
    '',
  ].join('\n');
}

export interface GatewayConfig {
  privateKey: string;
  /** The gateway's tunnel address and the tunnel's prefix length, e.g. 100.96.0.1/24. */
  address: string;
  listenPort: number;
  peers: readonly { publicKey: string; address: string }[];
}

/** The gateway's wg-quick file: each client may send only from its own tunnel address. */
export function renderGatewayConfig(config: GatewayConfig): string {
  const lines = [
    '[Interface]',
    `PrivateKey = ${config.privateKey}`,
    `Address = ${config.address}`,
    `ListenPort = ${config.listenPort}`,
  ];
  for (const peer of config.peers) {
    lines.push('', '[Peer]', `PublicKey = ${peer.publicKey}`, `AllowedIPs = ${peer.address}/32`);
  }
  lines.push('');
  return lines.join('\n');
}

/** How a gateway's configuration is compared without keeping it (it holds the private key): SHA-256, hex. */
export function configDigest(config: string): string {
  return createHash('sha256').update(config).digest('hex');
}
