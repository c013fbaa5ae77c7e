/** Billing as the platform serves it: usage, invoices, estimates, and the job that closes each period. */
import type { ResourceModule } from '../../platform/module.js';
import { billingRoutes } from './routes.js';
import { BILLING_JOB, type BillingService } from './service.js';

export function billingModule(deps: { billing: BillingService }): ResourceModule {
  return {
    name: 'billing',
    routes: async (app) => {
      await app.register(billingRoutes, deps);
    },
    jobs: { [BILLING_JOB.kind]: deps.billing },
    // The period job closes months and marks overdue invoices: it must exist before jobs run.
    start: () => deps.billing.start(),
  };
}
