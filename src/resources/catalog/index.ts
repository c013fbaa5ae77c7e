/** The catalogue as the platform serves it: instance types, regions and images, read-only. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { catalogRoutes } from './routes.js';

export function catalogModule(): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(catalogRoutes);
    },
  };
}

/** The resource as src/resources.ts lists it. */
export const CATALOG_RESOURCE = defineResource({
  name: 'catalog',
  module: catalogModule,
});
