/** Metrics' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as metrics from './0008_metrics.js';

export const METRIC_MIGRATIONS: Migrations = {
  '0008_metrics': metrics,
};
