/** Public IPs' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as publicIps from './0021_public_ips.js';
import * as publicIpsProtection from './0026_public_ips_protection.js';

export const PUBLIC_IP_MIGRATIONS: Migrations = {
  '0021_public_ips': publicIps,
  '0026_public_ips_protection': publicIpsProtection,
};
