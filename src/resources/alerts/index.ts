/** Alerts as the platform serves them: policies and incidents, and the job that sends notifications. */
import type { ResourceModule } from '../../platform/module.js';
import { NOTIFY_JOB } from './incidents.js';
import type { AlertNotifier } from './notifier.js';
import { alertRoutes } from './routes.js';
import type { AlertService } from './service.js';
import { countPolicies } from './store.js';

export function alertsModule(deps: { alerts: AlertService; notifier: AlertNotifier }): ResourceModule {
  return {
    name: 'alerts',
    routes: async (app) => {
      await app.register(alertRoutes, deps);
    },
    quotas: { alerts: countPolicies },
    jobs: { [NOTIFY_JOB.kind]: deps.notifier },
  };
}
