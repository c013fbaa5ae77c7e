/**
 * First start: with no account in the store, create one (enterprise plan) and write its key to
 * `<data dir>/bootstrap-api-key` (0600) for the operator. A settings row claimed with an insert makes sure
 * only one replica ever does this, even when several start at once on an empty PostgreSQL.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ModuleHost } from '../../platform/module.js';
import type { Store } from '../../platform/store/db.js';
import { claimSetting } from '../../platform/store/settings.js';
import type { AccountService } from './service.js';

export const BOOTSTRAP_EMAIL = 'admin@nimbus.local';
export const BOOTSTRAP_KEY_FILE = 'bootstrap-api-key';

export async function bootstrapAccount(
  store: Store,
  accounts: AccountService,
  { dataDir, logger }: ModuleHost,
): Promise<void> {
  if ((await accounts.list()).length > 0) return;
  if (!(await claimSetting(store.db, 'bootstrap', new Date().toISOString()))) return;
  const { account, apiKey } = await accounts.create({
    email: BOOTSTRAP_EMAIL,
    name: 'Bootstrap',
    plan: 'enterprise',
  });
  const file = path.join(dataDir, BOOTSTRAP_KEY_FILE);
  writeFileSync(file, `${apiKey.key}\n`, { mode: 0o600 });
  // writeFileSync's mode applies only to a file it creates, and through the umask.
  chmodSync(file, 0o600);
  // The file, never the key: logs are shipped and kept where the key must not be.
  logger.info({ account_id: account.id, file }, 'created the bootstrap account; its API key is in this file');
}
