import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { SshKeyService } from '../../services/ssh-keys.js';

export const sshKeyRoutes: FastifyPluginAsyncTypebox<{ sshKeys: SshKeyService }> = async () => {};
