/** Alerts as the platform serves them: policies and incidents, and the job that sends notifications. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { ALERT_EVENTS } from './events.js';
import { NOTIFY_JOB } from './incidents.js';
import { ALERT_MIGRATIONS } from './migrations/index.js';
import type { AlertNotifier } from './notifier.js';
import { alertRoutes } from './routes.js';
import type { AlertService } from './service.js';
import { countPolicies } from './store.js';

export function alertsModule(deps: { alerts: AlertService; notifier: AlertNotifier }): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(alertRoutes, deps);
    },
    quotas: { alerts: countPolicies },
    jobs: { [NOTIFY_JOB.kind]: deps.notifier },
  };
}

/** The resource as src/resources.ts lists it. */
export const ALERTS_RESOURCE = defineResource({
  name: 'alerts',
  migrations: ALERT_MIGRATIONS,
  events: ALERT_EVENTS,
  module: alertsModule,
});
