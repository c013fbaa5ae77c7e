/** The webhooks resource as the platform serves it: subscriptions, and a delivery for each event they match. */
import type { EventCatalogue } from '../../platform/events/catalog.js';
import type { ResourceModule } from '../../platform/module.js';
import { fanOutToWebhooks } from './fan-out.js';
import { webhookRoutes } from './routes.js';
import type { WebhookService } from './service.js';
import { countWebhooks } from './store.js';

export function webhooksModule(deps: {
  webhooks: WebhookService;
  catalogue: EventCatalogue;
}): ResourceModule {
  return {
    name: 'webhooks',
    routes: async (app) => {
      await app.register(webhookRoutes, deps);
    },
    quotas: { webhooks: countWebhooks },
    onEventRecorded: fanOutToWebhooks,
  };
}
