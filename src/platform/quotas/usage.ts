/**
 * What each resource row adds to its account's quota usage, so the store can keep per-account counters
 * instead of counting rows on every create (docs/design.md, "Quotas and plans"). A row's contribution depends only on
 * the row: an instance counts once with its type's vCPUs and GPUs whatever its status, until its row is
 * purged; a data volume counts once with its size (root volumes belong to their instance); a snapshot
 * counts once. Writing a row applies `usageDelta(before, after)`, which is all a counter ever needs; each
 * resource's kind says what its row adds (`usage` in resources/instances/kind.ts, volumes/kind.ts, snapshots/kind.ts).
 */
import type { QuotaName } from '../domain/plans.js';

/** The quotas kept as maintained counters; the others (small, per-account lists) are counted. */
export const COUNTED_QUOTAS = [
  'instances',
  'vcpus',
  'gpus',
  'volumes',
  'volume_storage_gb',
  'snapshots',
] as const;
export type CountedQuota = (typeof COUNTED_QUOTAS)[number];

export type Usage = Partial<Record<CountedQuota, number>>;

export function isCountedQuota(name: QuotaName): name is CountedQuota {
  return (COUNTED_QUOTAS as readonly string[]).includes(name);
}

/** after − before, per counter, leaving out the counters that do not move. */
export function usageDelta(before: Usage | null, after: Usage | null): Usage {
  const delta: Usage = {};
  for (const name of COUNTED_QUOTAS) {
    const change = (after?.[name] ?? 0) - (before?.[name] ?? 0);
    if (change !== 0) delta[name] = change;
  }
  return delta;
}
