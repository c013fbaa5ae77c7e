/**
 * SSH public keys given as files (`--ssh-key ~/.ssh/id_ed25519.pub`): read, matched against the account's
 * keys by their key material, and uploaded when new, so an instance can be created from the key a user
 * already has without a separate `ssh-keys add`.
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UsageError } from '../exit-codes.js';
import type { Session } from '../session.js';

export function expandHome(file: string): string {
  return file === '~' || file.startsWith('~/') ? path.join(os.homedir(), file.slice(1)) : file;
}

export interface PublicKeyFile {
  publicKey: string;
  /** The key's comment (often user@host), else the file's name without `.pub`. */
  suggestedName: string;
}

export function readPublicKeyFile(file: string): PublicKeyFile {
  const resolved = expandHome(file);
  let text: string;
  try {
    text = readFileSync(resolved, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read ${file}: ${(error as Error).message}`);
  }
  const line = text.split('\n').find((candidate) => candidate.trim() !== '' && !candidate.startsWith('#'));
  if (!line) throw new UsageError(`${file} holds no public key`);
  if (/PRIVATE KEY/.test(text)) {
    throw new UsageError(
      `${file} is a private key; give the public one (usually the same name ending in .pub)`,
    );
  }
  const [, , ...comment] = line.trim().split(/\s+/);
  const readable = comment.join(' ') || path.basename(resolved).replace(/\.pub$/, '');
  // Names take letters, digits, . _ and - (64 at most): "me@laptop" becomes "me-laptop".
  const suggestedName = readable.replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 64) || 'ssh-key';
  return { publicKey: line.trim(), suggestedName };
}

/** The "type base64" part that identifies a key whatever its comment. */
function keyMaterial(publicKey: string): string {
  return publicKey.trim().split(/\s+/).slice(0, 2).join(' ');
}

/** Whether `reference` names a key file rather than a key's id or name. */
export function isKeyFile(reference: string): boolean {
  return reference.includes('/') || reference.endsWith('.pub') || existsSync(expandHome(reference));
}

/** The id of the account's key with this file's key material, uploading it first when the account lacks it. */
export async function sshKeyIdForFile(session: Session, file: string, name?: string): Promise<string> {
  const { publicKey, suggestedName } = readPublicKeyFile(file);
  for await (const key of session.nimbus.paginate('/v1/ssh-keys')) {
    if (keyMaterial(key.public_key) === keyMaterial(publicKey)) return key.id;
  }
  const { data } = await session.nimbus.post('/v1/ssh-keys', {
    body: { name: name ?? suggestedName, public_key: publicKey },
  });
  process.stderr.write(`Added SSH key ${data.name} (${data.id}, ${data.fingerprint})\n`);
  return data.id;
}
