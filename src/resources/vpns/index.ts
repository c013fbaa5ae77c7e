/** The VPNs resource as the platform serves it. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { VPN_EVENTS } from './events.js';
import { VPN_MIGRATIONS } from './migrations/index.js';
import { vpnRoutes } from './routes.js';
import type { VpnService } from './service.js';
import { countVpns } from './store.js';

export function vpnsModule(deps: { vpns: VpnService }): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(vpnRoutes, deps);
    },
    quotas: { vpns: countVpns },
  };
}

/** The resource as src/resources.ts lists it. */
export const VPNS_RESOURCE = defineResource({
  name: 'vpns',
  migrations: VPN_MIGRATIONS,
  events: VPN_EVENTS,
  module: vpnsModule,
});
