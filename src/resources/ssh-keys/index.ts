/** The SSH keys resource as the platform serves it. */
import type { ResourceModule } from '../../platform/module.js';
import { sshKeyRoutes } from './routes.js';
import type { SshKeyService } from './service.js';

export function sshKeysModule(deps: { sshKeys: SshKeyService }): ResourceModule {
  return { name: 'ssh-keys', routes: async (app) => app.register(sshKeyRoutes, deps) };
}
