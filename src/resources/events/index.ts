/** The events resource as the platform serves it: the account's event log, read-only. */
import type { ResourceModule } from '../../platform/module.js';
import { eventRoutes } from './routes.js';
import type { EventService } from './service.js';

export function eventsModule(deps: { events: EventService }): ResourceModule {
  return { name: 'events', routes: async (app) => app.register(eventRoutes, deps) };
}
