/**
 * Secrets at rest (webhook signing secrets; later VPN private keys): AES-256-GCM under the installation's
 * master key, each bound to the record it belongs to (additional data), so a ciphertext copied onto
 * another record does not decrypt. Stored as `v1:` + base64(iv ‖ tag ‖ ciphertext).
 *
 * The master key is 32 random bytes: `NIMBUS_SECRET_KEY` (base64) or the file `NIMBUS_SECRET_KEY_FILE`
 * names when set — replicas sharing a database must share it — or else `<data dir>/master.key`, made on
 * first start with mode 0600 (services/master-key.ts decides which, and checks it against the store).
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const MASTER_KEY_FILE = 'master.key';
const VERSION = 'v1:';
/** What the fingerprint is an HMAC of: fixed, so every holder of the key computes the same one. */
const FINGERPRINT_LABEL = 'nimbus:master-key-fingerprint:v1';

/** A sealed value this key cannot open: sealed under another key, bound to another record, or altered. */
export class SealedSecretUnreadable extends Error {
  constructor(readonly boundTo: string) {
    super(
      `The secret sealed for ${boundTo} cannot be opened with this process's master key: it was sealed under ` +
        'another key (replicas must share NIMBUS_SECRET_KEY, docs/operations.md) or it was altered',
    );
  }
}

export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  static fromKey(key: Buffer): SecretBox {
    if (key.length !== 32) throw new Error('The master key must be 32 bytes');
    return new SecretBox(key);
  }

  /** The configured key, or the data dir's key file (made when missing). */
  static open(dataDir: string, configuredKey: Buffer | null): SecretBox {
    if (configuredKey) return SecretBox.fromKey(configuredKey);
    const file = path.join(dataDir, MASTER_KEY_FILE);
    if (!existsSync(file)) {
      // wx: two processes starting on one data dir never both write a key.
      try {
        writeFileSync(file, randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
    }
    return SecretBox.fromKey(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64'));
  }

  /**
   * Names the key without revealing it: an HMAC of a fixed label under the key (not a hash of the key,
   * which would let a copy of the store test guesses of the key offline without a keyed step).
   */
  fingerprint(): string {
    return `v1:${createHmac('sha256', this.key).update(FINGERPRINT_LABEL).digest('base64url')}`;
  }

  /**
   * A key for one other purpose (e.g. signing list cursors), derived with HKDF-SHA256 so that it is the
   * same on every replica sharing the master key and reveals nothing about it.
   */
  deriveKey(purpose: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `nimbus:${purpose}`, 32));
  }

  seal(plaintext: string, boundTo: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(boundTo, 'utf8'));
    const encrypted = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return VERSION + Buffer.concat([iv, cipher.getAuthTag(), encrypted]).toString('base64');
  }

  /** The plaintext; throws SealedSecretUnreadable when this key cannot open it for this record. */
  open(sealed: string, boundTo: string): string {
    const raw = sealed.startsWith(VERSION) ? Buffer.from(sealed.slice(VERSION.length), 'base64') : null;
    if (raw === null || raw.length < 28) throw new SealedSecretUnreadable(boundTo);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(boundTo, 'utf8'));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    } catch {
      throw new SealedSecretUnreadable(boundTo);
    }
  }
}
