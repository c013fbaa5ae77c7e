/** The instances resource as the platform serves it. */
import type { ResourceModule } from '../../platform/module.js';
import type { UsageCounter } from '../../platform/quotas/quotas.js';
import { type InstanceType, instanceTypeNamed } from '../catalog/catalog.js';
import { gpusOf } from './kind.js';
import { instanceRoutes } from './routes.js';
import type { InstanceService } from './service.js';
import { countAccountInstances, countByType } from './store.js';

export function instancesModule(deps: { instances: InstanceService }): ResourceModule {
  return {
    name: 'instances',
    routes: async (app) => {
      await app.register(instanceRoutes, deps);
    },
    quotas: {
      instances: countAccountInstances,
      vcpus: sumOverTypes((type) => type.vcpus),
      gpus: sumOverTypes(gpusOf),
    },
  };
}

/** An account's instances counted by type, each type weighing `measure` (its vCPUs, its GPUs). */
function sumOverTypes(measure: (type: InstanceType) => number): UsageCounter {
  return async (db, accountId) => {
    let total = 0;
    for (const [name, count] of await countByType(db, accountId)) {
      total += measure(instanceTypeNamed(name)) * count;
    }
    return total;
  };
}
