/** The events resource as the platform serves it: the account's event log, read-only. */
import { defineResource, type ModuleParts } from '../../platform/module.js';
import { eventRoutes } from './routes.js';
import type { EventService } from './service.js';

export function eventsModule(deps: { events: EventService }): ModuleParts {
  return { routes: async (app) => app.register(eventRoutes, deps) };
}

/** The resource as src/resources.ts lists it. */
export const EVENTS_RESOURCE = defineResource({
  name: 'events',
  module: eventsModule,
});
