/** The webhooks resource as the platform serves it: subscriptions, and a delivery for each event they match. */
import type { EventCatalogue } from '../../platform/events/catalog.js';
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { WEBHOOK_EVENTS } from './events.js';
import { fanOutToWebhooks } from './fan-out.js';
import { WEBHOOK_MIGRATIONS } from './migrations/index.js';
import { webhookRoutes } from './routes.js';
import type { WebhookService } from './service.js';
import { countWebhooks } from './store.js';

export function webhooksModule(deps: { webhooks: WebhookService; catalogue: EventCatalogue }): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(webhookRoutes, deps);
    },
    quotas: { webhooks: countWebhooks },
    onEventRecorded: fanOutToWebhooks,
  };
}

/** The resource as src/resources.ts lists it. */
export const WEBHOOKS_RESOURCE = defineResource({
  name: 'webhooks',
  migrations: WEBHOOK_MIGRATIONS,
  events: WEBHOOK_EVENTS,
  module: webhooksModule,
});
