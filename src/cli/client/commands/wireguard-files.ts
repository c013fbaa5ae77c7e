/**
 * WireGuard keys and client files on the user's machine. A peer added with `--private-key-file` sends
 * only the public key, derived here (X25519, as `wg pubkey` does), and the private key is written into the
 * wg-quick file locally: it never travels. Files holding a private key are written 0600.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { UsageError } from '../exit-codes.js';
import { expandHome } from './ssh-key-files.js';

/** DER prefix of a PKCS#8 X25519 private key; the 32 raw key bytes follow. */
const X25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');

export function readPrivateKeyFile(file: string): string {
  const key = readFileSync(expandHome(file), 'utf8').trim();
  if (Buffer.from(key, 'base64').length !== 32) {
    throw new UsageError(
      `${file} is not a WireGuard private key (base64 of 32 bytes, as "wg genkey" writes)`,
    );
  }
  return key;
}

/** The public key of a base64 WireGuard private key. */
export function wireguardPublicKey(privateKey: string): string {
  const der = Buffer.concat([X25519_PKCS8_PREFIX, Buffer.from(privateKey, 'base64')]);
  const jwk = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })).export({
    format: 'jwk',
  });
  return Buffer.from(jwk.x!, 'base64url').toString('base64');
}

/** The file with its `PrivateKey =` line set to `privateKey` (the server leaves a placeholder there). */
export function withPrivateKey(config: string, privateKey: string): string {
  return config.replace(/^PrivateKey\s*=.*$/m, `PrivateKey = ${privateKey}`);
}

export function writeSecretFile(file: string, text: string): void {
  writeFileSync(expandHome(file), text.endsWith('\n') ? text : `${text}\n`, { mode: 0o600 });
}
