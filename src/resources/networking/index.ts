/** Networking as the platform serves it: an instance's network and the account's firewall rules. */
import type { ResourceModule } from '../../platform/module.js';
import { firewallRuleRoutes } from './firewall-routes.js';
import type { FirewallRuleService } from './firewall-service.js';
import { countFirewallRules } from './firewall-store.js';
import { networkRoutes } from './routes.js';
import type { NetworkService } from './service.js';

export function networkingModule(deps: {
  network: NetworkService;
  firewallRules: FirewallRuleService;
}): ResourceModule {
  return {
    name: 'networking',
    routes: async (app) => {
      await app.register(networkRoutes, deps);
      await app.register(firewallRuleRoutes, deps);
    },
    quotas: { firewall_rules: countFirewallRules },
  };
}
