/** The volumes resource as the platform serves it. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { VOLUME_EVENTS } from './events.js';
import { VOLUME_MIGRATIONS } from './migrations/index.js';
import { volumeRoutes } from './routes.js';
import type { VolumeService } from './service.js';
import { countDataVolumes, sumDataVolumeGb } from './store.js';

export function volumesModule(deps: { volumes: VolumeService }): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(volumeRoutes, deps);
    },
    quotas: { volumes: countDataVolumes, volume_storage_gb: sumDataVolumeGb },
  };
}

/** The resource as src/resources.ts lists it. */
export const VOLUMES_RESOURCE = defineResource({
  name: 'volumes',
  migrations: VOLUME_MIGRATIONS,
  events: VOLUME_EVENTS,
  module: volumesModule,
});
