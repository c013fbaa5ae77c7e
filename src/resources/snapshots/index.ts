/** The snapshots resource as the platform serves it: snapshots, and the jobs of backup schedules. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { SCHEDULER_JOB } from '../volumes/backup-schedule-book.js';
import { SNAPSHOT_EVENTS } from './events.js';
import { snapshotRoutes } from './routes.js';
import { RETENTION_JOB, type SnapshotScheduler } from './scheduler.js';
import type { SnapshotService } from './service.js';
import { countSnapshots } from './store.js';

export function snapshotsModule(deps: {
  snapshots: SnapshotService;
  scheduler: SnapshotScheduler;
}): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(snapshotRoutes, deps);
    },
    quotas: { snapshots: countSnapshots },
    jobs: { [SCHEDULER_JOB.kind]: deps.scheduler, [RETENTION_JOB]: deps.scheduler.retention },
  };
}

/** The resource as src/resources.ts lists it. */
export const SNAPSHOTS_RESOURCE = defineResource({
  name: 'snapshots',
  events: SNAPSHOT_EVENTS,
  module: snapshotsModule,
});
