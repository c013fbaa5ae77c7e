/** The catalogue as the platform serves it: instance types, regions and images, read-only. */
import type { ResourceModule } from '../../platform/module.js';
import { catalogRoutes } from './routes.js';

export function catalogModule(): ResourceModule {
  return {
    name: 'catalog',
    routes: async (app) => {
      await app.register(catalogRoutes);
    },
  };
}
