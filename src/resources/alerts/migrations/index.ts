/** Alerts' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as alerts from './0011_alerts.js';
import * as alertNotificationsDue from './0013_alert_notifications_due.js';
import * as alertPolicyDeleted from './0014_alert_policy_deleted.js';

export const ALERT_MIGRATIONS: Migrations = {
  '0011_alerts': alerts,
  '0013_alert_notifications_due': alertNotificationsDue,
  '0014_alert_policy_deleted': alertPolicyDeleted,
};
