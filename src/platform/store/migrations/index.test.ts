/**
 * The one migration history put together from the platform's part and each resource's: the names the
 * databases already record, in the order they were replayed, whichever folder holds each file; and a
 * number taken twice, or a name without one, refused when the history is made.
 */
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../../resources.js';
import { migrationHistory, PLATFORM_MIGRATIONS } from './index.js';

/** Released: recorded in existing databases under these names, in this order. Never edited. */
const RELEASED = [
  '0001_foundation',
  '0002_instances',
  '0003_webhooks',
  '0004_volumes',
  '0005_snapshots',
  '0006_firewall_rules',
  '0007_vpns',
  '0008_metrics',
  '0009_billing',
  '0010_write_path',
  '0011_alerts',
  '0012_billing_totals',
  '0013_alert_notifications_due',
  '0014_alert_policy_deleted',
  '0015_instances_monitored',
  '0016_idempotency_commits',
  '0017_event_actor',
  '0018_account_email_not_unique',
  '0019_instances_region_name',
];

const noop = { up: async () => {} };

describe('the migration history', () => {
  it('replays the released migrations under their recorded names, in their order, then the newer ones', async () => {
    expect(MIGRATIONS.names.slice(0, RELEASED.length)).toEqual(RELEASED);
    expect(Object.keys(await MIGRATIONS.getMigrations())).toEqual(MIGRATIONS.names);
    expect([...MIGRATIONS.names].sort()).toEqual(MIGRATIONS.names);
  });

  it('orders by number whatever part holds a migration', async () => {
    const history = migrationHistory(
      { '0003_c': noop },
      { '0001_a': noop, '0004_d': noop },
      { '0002_b': noop },
    );
    expect(history.names).toEqual(['0001_a', '0002_b', '0003_c', '0004_d']);
    expect(Object.keys(await history.getMigrations())).toEqual(history.names);
  });

  it('refuses a number taken twice, naming both migrations', () => {
    expect(() => migrationHistory(PLATFORM_MIGRATIONS, { '0010_something_else': noop })).toThrow(
      'Migrations 0010_write_path and 0010_something_else both take number 0010',
    );
    expect(() => migrationHistory({ '0020_a': noop }, { '0020_a': noop })).toThrow('both take number 0020');
  });

  it('refuses a name that does not start with its four-digit number', () => {
    expect(() => migrationHistory({ add_volumes: noop })).toThrow(
      'Migration add_volumes: a migration is named NNNN_words',
    );
    expect(() => migrationHistory({ '20_volumes': noop })).toThrow('NNNN_words');
  });
});
