/**
 * The store's one migration history, put together here with the composition root: the platform's
 * migrations and each resource's (its `migrations/` folder), replayed in the order of their numbers
 * (platform/store/migrations/index.ts). A resource with tables of its own adds its part here.
 */
import { migrationHistory, PLATFORM_MIGRATIONS } from './platform/store/migrations/index.js';
import { ACCOUNT_MIGRATIONS } from './resources/account/migrations/index.js';
import { ADDRESS_MIGRATIONS } from './resources/addresses/migrations/index.js';
import { ALERT_MIGRATIONS } from './resources/alerts/migrations/index.js';
import { BILLING_MIGRATIONS } from './resources/billing/migrations/index.js';
import { INSTANCE_MIGRATIONS } from './resources/instances/migrations/index.js';
import { METRIC_MIGRATIONS } from './resources/metrics/migrations/index.js';
import { NETWORKING_MIGRATIONS } from './resources/networking/migrations/index.js';
import { PUBLIC_IP_MIGRATIONS } from './resources/public-ips/migrations/index.js';
import { VOLUME_MIGRATIONS } from './resources/volumes/migrations/index.js';
import { VPN_MIGRATIONS } from './resources/vpns/migrations/index.js';
import { WEBHOOK_MIGRATIONS } from './resources/webhooks/migrations/index.js';

export const MIGRATIONS = migrationHistory(
  PLATFORM_MIGRATIONS,
  ACCOUNT_MIGRATIONS,
  INSTANCE_MIGRATIONS,
  VOLUME_MIGRATIONS,
  NETWORKING_MIGRATIONS,
  VPN_MIGRATIONS,
  METRIC_MIGRATIONS,
  BILLING_MIGRATIONS,
  ALERT_MIGRATIONS,
  WEBHOOK_MIGRATIONS,
  ADDRESS_MIGRATIONS,
  PUBLIC_IP_MIGRATIONS,
);
