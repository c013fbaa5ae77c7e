/** The public IPs resource as the platform serves it: its routes, its quota, and what an instance's delete does to its address. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { PUBLIC_IP_EVENTS } from './events.js';
import { PUBLIC_IP_MIGRATIONS } from './migrations/index.js';
import { publicIpRoutes } from './routes.js';
import type { PublicIpService } from './service.js';
import { countKeptPublicIps } from './store.js';
import { releaseWithInstance } from './with-instance.js';

export function publicIpsModule(deps: { publicIps: PublicIpService }): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(publicIpRoutes, deps);
    },
    quotas: { public_ips: countKeptPublicIps },
    onEventRecorded: releaseWithInstance,
  };
}

/** The resource as src/resources.ts lists it. */
export const PUBLIC_IPS_RESOURCE = defineResource({
  name: 'public-ips',
  migrations: PUBLIC_IP_MIGRATIONS,
  events: PUBLIC_IP_EVENTS,
  module: publicIpsModule,
});
