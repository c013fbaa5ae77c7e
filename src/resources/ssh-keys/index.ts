/** The SSH keys resource as the platform serves it. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { SSH_KEY_EVENTS } from './events.js';
import { sshKeyRoutes } from './routes.js';
import type { SshKeyService } from './service.js';

export function sshKeysModule(deps: { sshKeys: SshKeyService }): ModuleParts {
  return { routes: async (app) => app.register(sshKeyRoutes, deps) };
}

/** The resource as src/resources.ts lists it. */
export const SSH_KEYS_RESOURCE = defineResource({
  name: 'ssh-keys',
  events: SSH_KEY_EVENTS,
  module: sshKeysModule,
});
