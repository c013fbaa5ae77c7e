/** The public IPs resource as the platform serves it: its routes, its quota, and what an instance's delete does to its address. */
import type { ResourceModule } from '../../platform/module.js';
import { publicIpRoutes } from './routes.js';
import type { PublicIpService } from './service.js';
import { countKeptPublicIps } from './store.js';
import { releaseWithInstance } from './with-instance.js';

export function publicIpsModule(deps: { publicIps: PublicIpService }): ResourceModule {
  return {
    name: 'public-ips',
    routes: async (app) => {
      await app.register(publicIpRoutes, deps);
    },
    quotas: { public_ips: countKeptPublicIps },
    onEventRecorded: releaseWithInstance,
  };
}
