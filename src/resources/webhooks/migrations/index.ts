/** Webhooks' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as webhooks from './0003_webhooks.js';

export const WEBHOOK_MIGRATIONS: Migrations = {
  '0003_webhooks': webhooks,
};
