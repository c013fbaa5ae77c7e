/**
 * The real WireGuard tools (Debian `wireguard-tools`; npm test's set-up installs them): `wg pubkey` and
 * `wg-quick strip`, run as argument arrays, never through a shell.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** What `wg pubkey` prints for a private key. */
export function wgPubkey(privateKey: string): string {
  return execFileSync('wg', ['pubkey'], { input: `${privateKey}\n`, encoding: 'utf8' }).trim();
}

/**
 * Runs `wg-quick strip` on the text as the file `wg0.conf` (wg-quick takes the interface name from the
 * file name); returns what it prints (the configuration `wg` itself would load) or throws with its error.
 */
export function wgQuickStrip(config: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-wg-'));
  try {
    const file = path.join(dir, 'wg0.conf');
    writeFileSync(file, config, { mode: 0o600 });
    return execFileSync('wg-quick', ['strip', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
