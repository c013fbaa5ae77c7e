/** Networking's migrations (firewall rules), in the store's one history (platform/store/migrations/index.ts). */
import type { Migrations } from '../../../platform/store/migrations/index.js';
import * as firewallRules from './0006_firewall_rules.js';

export const NETWORKING_MIGRATIONS: Migrations = {
  '0006_firewall_rules': firewallRules,
};
