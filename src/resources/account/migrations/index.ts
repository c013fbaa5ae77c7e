/** The account's migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as accountEmailNotUnique from './0018_account_email_not_unique.js';

export const ACCOUNT_MIGRATIONS: Migrations = {
  '0018_account_email_not_unique': accountEmailNotUnique,
};
