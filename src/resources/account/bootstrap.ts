/**
 * First start: with no account in the store, create one (enterprise plan) and hand back its key so the
 * caller can write it to the data dir. A settings row claimed with an insert makes sure only one
 * replica ever does this, even when several start at once on an empty PostgreSQL.
 */

import type { Store } from '../../platform/store/db.js';
import { claimSetting } from '../../platform/store/settings.js';
import type { AccountService } from './service.js';

export const BOOTSTRAP_EMAIL = 'admin@nimbus.local';

export async function bootstrapAccount(
  store: Store,
  accounts: AccountService,
): Promise<{ accountId: string; apiKey: string } | null> {
  if ((await accounts.list()).length > 0) return null;
  if (!(await claimSetting(store.db, 'bootstrap', new Date().toISOString()))) return null;
  const { account, apiKey } = await accounts.create({
    email: BOOTSTRAP_EMAIL,
    name: 'Bootstrap',
    plan: 'enterprise',
  });
  return { accountId: account.id, apiKey: apiKey.key };
}
