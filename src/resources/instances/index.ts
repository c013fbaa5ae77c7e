/** The instances resource as the platform serves it. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import type { UsageCounter } from '../../platform/quotas/quotas.js';
import { type InstanceType, instanceTypeNamed } from '../catalog/catalog.js';
import { INSTANCE_EVENTS } from './events.js';
import { gpusOf } from './kind.js';
import { INSTANCE_MIGRATIONS } from './migrations/index.js';
import { instanceRoutes } from './routes.js';
import type { InstanceService } from './service.js';
import { countAccountInstances, countByType } from './store.js';

export function instancesModule(deps: { instances: InstanceService }): ModuleParts {
  return {
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

/** The resource as src/resources.ts lists it. */
export const INSTANCES_RESOURCE = defineResource({
  name: 'instances',
  migrations: INSTANCE_MIGRATIONS,
  events: INSTANCE_EVENTS,
  module: instancesModule,
});

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
