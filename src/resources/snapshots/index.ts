/** The snapshots resource as the platform serves it: snapshots, and the jobs of backup schedules. */
import type { ResourceModule } from '../../platform/module.js';
import { SCHEDULER_JOB } from '../volumes/backup-schedule-book.js';
import { snapshotRoutes } from './routes.js';
import { RETENTION_JOB, type SnapshotScheduler } from './scheduler.js';
import type { SnapshotService } from './service.js';
import { countSnapshots } from './store.js';

export function snapshotsModule(deps: {
  snapshots: SnapshotService;
  scheduler: SnapshotScheduler;
}): ResourceModule {
  return {
    name: 'snapshots',
    routes: async (app) => {
      await app.register(snapshotRoutes, deps);
    },
    quotas: { snapshots: countSnapshots },
    jobs: { [SCHEDULER_JOB.kind]: deps.scheduler, [RETENTION_JOB]: deps.scheduler.retention },
  };
}
