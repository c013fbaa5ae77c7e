/**
 * The CLI's own settings: `~/.config/nimbus/config.json` (or under XDG_CONFIG_HOME), one entry per
 * profile with the server's URL, the API key and, for a self-signed server, the certificate fingerprint
 * the user chose to trust. It holds a secret, so the file is written 0600 in a 0700 directory, through a
 * temporary file renamed into place: an interrupted write never leaves half a file, and the key is never
 * readable by others even for a moment.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UsageError } from './exit-codes.js';

export interface Profile {
  url: string;
  api_key: string;
  /** SHA-256 of the server certificate trusted at login (self-signed servers only). */
  tls_fingerprint?: string;
}

export interface ConfigFile {
  profiles: Record<string, Profile>;
}

export const DEFAULT_PROFILE = 'default';

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || path.join(env.HOME || os.homedir(), '.config');
  return path.join(base, 'nimbus', 'config.json');
}

export function readConfig(file = configPath()): ConfigFile {
  if (!existsSync(file)) return { profiles: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new UsageError(`${file} is not valid JSON (${(error as Error).message}); fix or remove it`);
  }
  const profiles = (parsed as { profiles?: unknown }).profiles;
  if (typeof profiles !== 'object' || profiles === null) return { profiles: {} };
  return { profiles: profiles as Record<string, Profile> };
}

export function writeConfig(config: ConfigFile, file = configPath()): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  // The mode above applies only when the file is created; a stale temporary file would keep its own.
  chmodSync(temporary, 0o600);
  renameSync(temporary, file);
}
