/** Billing's migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as billing from './0009_billing.js';
import * as billingTotals from './0012_billing_totals.js';
import * as dataTransfer from './0022_data_transfer.js';
import * as billingLines from './0023_billing_lines.js';

export const BILLING_MIGRATIONS: Migrations = {
  '0009_billing': billing,
  '0012_billing_totals': billingTotals,
  '0022_data_transfer': dataTransfer,
  '0023_billing_lines': billingLines,
};
