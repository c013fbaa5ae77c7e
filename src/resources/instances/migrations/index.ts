/** Instances' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as instancesMonitored from './0015_instances_monitored.js';
import * as instancesRegionName from './0019_instances_region_name.js';
import * as instancesProtection from './0024_instances_protection.js';

export const INSTANCE_MIGRATIONS: Migrations = {
  '0015_instances_monitored': instancesMonitored,
  '0019_instances_region_name': instancesRegionName,
  '0024_instances_protection': instancesProtection,
};
