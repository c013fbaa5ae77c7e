import type { Migration, MigrationProvider } from 'kysely';
import * as foundation from './0001_foundation.js';
import * as instances from './0002_instances.js';
import * as webhooks from './0003_webhooks.js';
import * as volumes from './0004_volumes.js';
import * as snapshots from './0005_snapshots.js';
import * as firewallRules from './0006_firewall_rules.js';
import * as vpns from './0007_vpns.js';
import * as metrics from './0008_metrics.js';
import * as billing from './0009_billing.js';
import * as writePath from './0010_write_path.js';
import * as alerts from './0011_alerts.js';
import * as billingTotals from './0012_billing_totals.js';
import * as alertNotificationsDue from './0013_alert_notifications_due.js';
import * as alertPolicyDeleted from './0014_alert_policy_deleted.js';
import * as instancesMonitored from './0015_instances_monitored.js';
import * as idempotencyCommits from './0016_idempotency_commits.js';
import * as eventActor from './0017_event_actor.js';
import * as accountEmailNotUnique from './0018_account_email_not_unique.js';
import * as instancesRegionName from './0019_instances_region_name.js';
import * as dataTransfer from './0022_data_transfer.js';

/** The one migration history, for SQLite and PostgreSQL alike. Append; never edit a released one. */
const migrations: Record<string, Migration> = {
  '0001_foundation': foundation,
  '0002_instances': instances,
  '0003_webhooks': webhooks,
  '0004_volumes': volumes,
  '0005_snapshots': snapshots,
  '0006_firewall_rules': firewallRules,
  '0007_vpns': vpns,
  '0008_metrics': metrics,
  '0009_billing': billing,
  '0010_write_path': writePath,
  '0011_alerts': alerts,
  '0012_billing_totals': billingTotals,
  '0013_alert_notifications_due': alertNotificationsDue,
  '0014_alert_policy_deleted': alertPolicyDeleted,
  '0015_instances_monitored': instancesMonitored,
  '0016_idempotency_commits': idempotencyCommits,
  '0017_event_actor': eventActor,
  '0018_account_email_not_unique': accountEmailNotUnique,
  '0019_instances_region_name': instancesRegionName,
  '0022_data_transfer': dataTransfer,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
