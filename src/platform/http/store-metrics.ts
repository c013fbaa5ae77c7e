/** The store's own figures in the Prometheus text format: SQLite's group commit (platform/store/group-commit.ts). */
import type { GroupCommitStats } from '../store/group-commit.js';

const SERIES: readonly { key: keyof GroupCommitStats; name: string; type: string; help: string }[] = [
  {
    key: 'commits',
    name: 'nimbus_sqlite_commits_total',
    type: 'counter',
    help: 'SQLite COMMITs that made writes durable (each one fsync of the WAL)',
  },
  {
    key: 'members',
    name: 'nimbus_sqlite_commit_members_total',
    type: 'counter',
    help: 'Transactions and plain writes made durable by those COMMITs (members per commit = this / commits)',
  },
  {
    key: 'rolledBack',
    name: 'nimbus_sqlite_commit_rollbacks_total',
    type: 'counter',
    help: 'Transactions rolled back to their savepoint inside a batch (they threw)',
  },
  {
    key: 'largestBatch',
    name: 'nimbus_sqlite_commit_largest_batch',
    type: 'gauge',
    help: 'The most members one COMMIT has held',
  },
  {
    key: 'statements',
    name: 'nimbus_sqlite_statements_total',
    type: 'counter',
    help: 'Statements run on the SQLite store for callers (reads and writes)',
  },
  {
    key: 'waiting',
    name: 'nimbus_sqlite_commit_waiting',
    type: 'gauge',
    help: 'Transactions and plain writes waiting for the open batch to COMMIT (not answered yet)',
  },
];

/** Empty on PostgreSQL (null stats). */
export function storeMetricsExposition(stats: GroupCommitStats | null): string {
  if (!stats) return '';
  return SERIES.map(
    ({ key, name, type, help }) => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${stats[key]}\n`,
  ).join('');
}
