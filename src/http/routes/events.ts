import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { EventService } from '../../services/events.js';

export const eventRoutes: FastifyPluginAsyncTypebox<{ events: EventService }> = async () => {};
