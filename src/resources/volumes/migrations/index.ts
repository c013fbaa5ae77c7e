/** Volumes' migrations, in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as volumes from './0004_volumes.js';
import * as volumesProtection from './0025_volumes_protection.js';

export const VOLUME_MIGRATIONS: Migrations = {
  '0004_volumes': volumes,
  '0025_volumes_protection': volumesProtection,
};
