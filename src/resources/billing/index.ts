/** Billing as the platform serves it: usage, invoices, estimates, and the job that closes each period. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { INVOICE_EVENTS } from './events.js';
import { BILLING_MIGRATIONS } from './migrations/index.js';
import { billingRoutes } from './routes.js';
import { BILLING_JOB, type BillingService } from './service.js';
import { TRANSFER_JOB, type TransferCollector } from './transfer-collector.js';

export function billingModule(deps: { billing: BillingService; transfer: TransferCollector }): ModuleParts {
  return {
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

/** The resource as src/resources.ts lists it. */
export const BILLING_RESOURCE = defineResource({
  name: 'billing',
  migrations: BILLING_MIGRATIONS,
  events: INVOICE_EVENTS,
  module: billingModule,
});
