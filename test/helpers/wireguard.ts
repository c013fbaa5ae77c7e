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

/**
 * A WireGuard client brought up with `wg-quick` inside `namespace` from a client file (the API's), on
 * the userspace implementation (WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go: this kernel has no
 * WireGuard module). `device` names the interface (and the file); it must be unique on the host, since
 * wireguard-go's control socket is in /var/run/wireguard whatever the namespace. The file's `DNS =` line
 * is left out: wg-quick would hand it to resolvconf, which the test host does not have. `down` takes the
 * client away (also its wireguard-go, should wg-quick fail half-way); safe to call twice.
 */
export class WireGuardClient {
  private readonly dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-wg-client-'));
  private readonly file: string;

  constructor(
    readonly namespace: string,
    readonly device: string,
    config: string,
  ) {
    this.file = path.join(this.dir, `${device}.conf`);
    const withoutDns = config
      .split('\n')
      .filter((line) => !/^DNS\s*=/.test(line))
      .join('\n');
    writeFileSync(this.file, withoutDns, { mode: 0o600 });
  }

  up(): void {
    execFileSync('ip', ['netns', 'exec', this.namespace, 'wg-quick', 'up', this.file], {
      env: { ...process.env, WG_QUICK_USERSPACE_IMPLEMENTATION: 'wireguard-go' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  down(): void {
    try {
      execFileSync('ip', ['netns', 'exec', this.namespace, 'wg-quick', 'down', this.file], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch {
      // not up, or its namespace is gone
    }
    try {
      execFileSync('ip', ['netns', 'exec', this.namespace, 'ip', 'link', 'del', this.device], {
        stdio: 'ignore',
      });
    } catch {
      // gone already
    }
    rmSync(path.join('/var/run/wireguard', `${this.device}.sock`), { force: true });
    rmSync(this.dir, { recursive: true, force: true });
  }
}
