/** Networking as the platform serves it: an instance's network and the account's firewall rules. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { FIREWALL_RULE_EVENTS } from './events.js';
import { firewallRuleRoutes } from './firewall-routes.js';
import type { FirewallRuleService } from './firewall-service.js';
import { countFirewallRules } from './firewall-store.js';
import { NETWORKING_MIGRATIONS } from './migrations/index.js';
import { networkRoutes } from './routes.js';
import type { NetworkService } from './service.js';

export function networkingModule(deps: {
  network: NetworkService;
  firewallRules: FirewallRuleService;
}): ModuleParts {
  return {
    routes: async (app) => {
      await app.register(networkRoutes, deps);
      await app.register(firewallRuleRoutes, deps);
    },
    quotas: { firewall_rules: countFirewallRules },
  };
}

/** The resource as src/resources.ts lists it. */
export const NETWORKING_RESOURCE = defineResource({
  name: 'networking',
  migrations: NETWORKING_MIGRATIONS,
  events: FIREWALL_RULE_EVENTS,
  module: networkingModule,
});
