/** The volumes resource as the platform serves it. */
import type { ResourceModule } from '../../platform/module.js';
import { volumeRoutes } from './routes.js';
import type { VolumeService } from './service.js';
import { countDataVolumes, sumDataVolumeGb } from './store.js';

export function volumesModule(deps: { volumes: VolumeService }): ResourceModule {
  return {
    name: 'volumes',
    routes: async (app) => {
      await app.register(volumeRoutes, deps);
    },
    quotas: { volumes: countDataVolumes, volume_storage_gb: sumDataVolumeGb },
  };
}
