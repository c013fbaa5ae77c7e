/** Public addresses' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as publicAddressHolds from './0020_public_address_holds.js';

export const ADDRESS_MIGRATIONS: Migrations = {
  '0020_public_address_holds': publicAddressHolds,
};
