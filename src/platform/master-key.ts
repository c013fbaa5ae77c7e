/**
 * Which master key a process seals and opens secrets with, and the check that every process on one
 * store has the same one (issue 29, item 8).
 *
 * Two replicas on one PostgreSQL that each made their own `<data dir>/master.key` could not open each
 * other's secrets: webhook deliveries stopped and /v2 cursors were refused by the other replica. So:
 * - on PostgreSQL (the only store replicas share) the key must be configured, NIMBUS_SECRET_KEY or
 *   NIMBUS_SECRET_KEY_FILE; a key file a process made for itself is never enough;
 * - the store keeps the key's fingerprint (SecretBox.fingerprint, an HMAC under the key, never the key
 *   or a plain hash of it) in `settings`, written by the first process that finds none (an insert that
 *   exactly one process wins); a process whose key has another fingerprint refuses to start.
 * A store that already holds sealed secrets but no fingerprint (made before this check) takes the
 * fingerprint only of a key that opens them, so a replica with the wrong key cannot claim it first.
 * An operator replacing the key on purpose sets the fingerprint to `reset` (docs/operations.md): the
 * next process's key is then recorded whatever is sealed.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { type Config, ConfigError } from './config.js';
import { MASTER_KEY_FILE, SealedSecretUnreadable, SecretBox } from './secret-box.js';
import type { Executor } from './store/schema.js';
import { claimSetting, findSetting, replaceSetting } from './store/settings.js';

export const FINGERPRINT_SETTING = 'master_key_fingerprint';
/** The fingerprint's value that an operator writes to have the next process's key recorded. */
export const FINGERPRINT_RESET = 'reset';
const HOW_TO = 'docs/operations.md, "Secrets at rest"';

/** A secret sealed in the store, with the associated data it was sealed with (SecretBox.open's binding). */
export interface SealedSecret {
  sealed: string;
  boundTo: string;
}

/**
 * How a resource that seals secrets in the store finds one of them, if it has any (a webhook's signing
 * secret, a VPN's private key); the composition root hands the resources' probes to checkMasterKey.
 */
export type SealedSecretProbe = (db: Executor) => Promise<SealedSecret | undefined>;

export interface MasterKey {
  box: SecretBox;
  /** Where the key came from, for messages: the variable, or the file's path. Never the key. */
  source: string;
}

/** The configured key; on SQLite without one, the data dir's key file (made when missing). */
export function resolveMasterKey(config: Config): MasterKey {
  if (config.masterKey) {
    return {
      box: SecretBox.fromKey(config.masterKey),
      source: config.masterKeySource ?? 'NIMBUS_SECRET_KEY',
    };
  }
  const file = path.join(config.dataDir, MASTER_KEY_FILE);
  if (config.databaseUrl) {
    const existing = existsSync(file)
      ? ` This data dir has a key file, ${file}: if it is the key that sealed this database's secrets, ` +
        `set NIMBUS_SECRET_KEY_FILE=${file} (or copy it to a file every replica reads).`
      : '';
    throw new ConfigError(
      'Refusing to start: NIMBUS_DATABASE_URL is PostgreSQL, which replicas share, and no master key is ' +
        'configured, so this process would seal secrets with a key of its own that no other replica has. ' +
        'Set NIMBUS_SECRET_KEY (base64 of 32 random bytes, e.g. "openssl rand -base64 32") or ' +
        `NIMBUS_SECRET_KEY_FILE (a file holding it) to the same key on every replica and admin command.${existing} ` +
        `(${HOW_TO})`,
    );
  }
  return { box: SecretBox.open(config.dataDir, null), source: `the key file ${file}` };
}

/**
 * Refuses (ConfigError) a key whose fingerprint is not the store's; records it when the store has none.
 * Run once at start, after migrations. `probes` find what the resources sealed, for a store from before
 * fingerprints.
 */
export async function checkMasterKey(
  db: Executor,
  key: MasterKey,
  probes: readonly SealedSecretProbe[],
): Promise<void> {
  const mine = key.box.fingerprint();
  let stored = await findSetting(db, FINGERPRINT_SETTING);
  if (stored === undefined) {
    await checkOpensWhatIsSealed(db, key, probes);
    if (await claimSetting(db, FINGERPRINT_SETTING, mine)) return;
    // Another process recorded its key first: this one must be the same.
    stored = await findSetting(db, FINGERPRINT_SETTING);
  }
  if (stored === FINGERPRINT_RESET) {
    if (await replaceSetting(db, FINGERPRINT_SETTING, FINGERPRINT_RESET, mine)) return;
    stored = await findSetting(db, FINGERPRINT_SETTING);
  }
  if (stored !== mine) {
    throw new ConfigError(
      `Refusing to start: the master key from ${key.source} is not the key this store's secrets are ` +
        'sealed with (its fingerprint differs from the one the store keeps), so this process could not ' +
        'sign webhook deliveries, open /v2 cursors of other replicas or configure VPN gateways. Start it ' +
        'with the key the other replicas use (NIMBUS_SECRET_KEY or NIMBUS_SECRET_KEY_FILE, the same on ' +
        `every replica). (${HOW_TO})`,
    );
  }
}

/** A store from before fingerprints: the key must open a secret already sealed there, if there is one. */
async function checkOpensWhatIsSealed(
  db: Executor,
  key: MasterKey,
  probes: readonly SealedSecretProbe[],
): Promise<void> {
  const found = [];
  for (const probe of probes) found.push(await probe(db));
  try {
    for (const secret of found) if (secret) key.box.open(secret.sealed, secret.boundTo);
  } catch (error) {
    if (!(error instanceof SealedSecretUnreadable)) throw error;
    throw new ConfigError(
      `Refusing to start: the master key from ${key.source} cannot open the secrets already sealed in ` +
        `this store (${error.boundTo}): they were sealed under another key. Start with that key ` +
        `(NIMBUS_SECRET_KEY or NIMBUS_SECRET_KEY_FILE, the same on every replica). (${HOW_TO})`,
    );
  }
}
