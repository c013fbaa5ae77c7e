/** VPNs' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as vpns from './0007_vpns.js';

export const VPN_MIGRATIONS: Migrations = {
  '0007_vpns': vpns,
};
