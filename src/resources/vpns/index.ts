/** The VPNs resource as the platform serves it. */
import type { ResourceModule } from '../../platform/module.js';
import { vpnRoutes } from './routes.js';
import type { VpnService } from './service.js';
import { countVpns } from './store.js';

export function vpnsModule(deps: { vpns: VpnService }): ResourceModule {
  return {
    name: 'vpns',
    routes: async (app) => {
      await app.register(vpnRoutes, deps);
    },
    quotas: { vpns: countVpns },
  };
}
