/** The account resource as the platform serves it: the account, its API keys and what it uses of its quotas. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { RateLimitService } from '../../platform/rate-limits/rate-limits.js';
import type { Store } from '../../platform/store/db.js';
import { apiKeyRoutes } from './api-key-routes.js';
import type { ApiKeyService } from './api-key-service.js';
import { countApiKeys } from './api-key-store.js';
import { bootstrapAccount } from './bootstrap.js';
import { API_KEY_EVENTS } from './events.js';
import { ACCOUNT_MIGRATIONS } from './migrations/index.js';
import { accountRoutes } from './routes.js';
import type { AccountService } from './service.js';

export function accountModule({
  store,
  ...deps
}: {
  store: Store;
  accounts: AccountService;
  apiKeys: ApiKeyService;
  quotas: QuotaService;
  rateLimits: RateLimitService;
}): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(accountRoutes, deps);
      await app.register(apiKeyRoutes, deps);
    },
    quotas: { api_keys: countApiKeys },
    prepare: async (host) => {
      await deps.apiKeys.start();
      await bootstrapAccount(store, deps.accounts, host);
    },
  };
}

/** The resource as src/resources.ts lists it. */
export const ACCOUNT_RESOURCE = defineResource({
  name: 'account',
  migrations: ACCOUNT_MIGRATIONS,
  events: API_KEY_EVENTS,
  module: accountModule,
});
