/** The account resource as the platform serves it: the account, its API keys and what it uses of its quotas. */
import type { ResourceModule } from '../../platform/module.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import type { RateLimitService } from '../../platform/rate-limits/rate-limits.js';
import type { Store } from '../../platform/store/db.js';
import { apiKeyRoutes } from './api-key-routes.js';
import type { ApiKeyService } from './api-key-service.js';
import { countApiKeys } from './api-key-store.js';
import { bootstrapAccount } from './bootstrap.js';
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
}): ResourceModule {
  return {
    name: 'account',
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
