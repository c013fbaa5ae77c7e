/** Billing as the platform serves it: usage, invoices, estimates, and the job that closes each period. */
import type { ResourceModule } from '../../platform/module.js';
import { billingRoutes } from './routes.js';
import { BILLING_JOB, type BillingService } from './service.js';
import { TRANSFER_JOB, type TransferCollector } from './transfer-collector.js';

export function billingModule(deps: {
  billing: BillingService;
  transfer: TransferCollector;
}): ResourceModule {
  return {
    name: 'billing',
    routes: async (app) => {
      await app.register(billingRoutes, deps);
    },
    jobs: { [BILLING_JOB.kind]: deps.billing, [TRANSFER_JOB.kind]: deps.transfer },
    // The period job closes months and marks overdue invoices: it must exist before jobs run.
    start: async () => {
      await deps.billing.start();
      // Data transfer counted each metrics interval (transfer-collector.ts).
      await deps.transfer.start();
    },
  };
}
