/**
 * What a resource (src/resources/<kind>) hands the platform, which never imports one. Each resource's
 * index.ts exports its definition (`defineResource`): what is known of it before any service exists (its
 * migrations, its event types) and the factory of its module. The one list of resources (src/resources.ts)
 * names each definition once; the migration history, the event catalogue and the modules are derived
 * from that list. The composition root (src/composition.ts) makes each module from the services it built
 * for it and registers every part where it belongs, the HTTP app serves the routes, and the server
 * (main.ts) runs the start-up hooks of every module in module order. A part a resource does not have is
 * left out.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { QuotaName } from './domain/plans.js';
import type { EventEntry } from './events/catalog.js';
import type { EventSubscriber } from './events/outbox.js';
import type { JobHandler } from './jobs/runner.js';
import type { UsageCounter } from './quotas/quotas.js';
import type { Migrations } from './store/migrations/index.js';

/**
 * A resource as the one list names it. `migrations` and `events` are read before any service exists (the
 * migrator, the admin CLI, the event catalogue); `module` is called by the composition root with what the
 * resource's parts need, once those are built.
 */
export interface ResourceDefinition {
  /** The resource's folder under src/resources. */
  readonly name: string;
  /** Its migrations, numbered in the store's one history (platform/store/migrations/index.ts). */
  readonly migrations?: Migrations;
  /** Its event types, by name (platform/events/catalog.ts); each also added to `EventCatalog`. */
  readonly events?: Readonly<Record<string, EventEntry>>;
  /** Its module's parts, from the services built for it; absent for a resource that only lends parts to others. */
  readonly module?: (needs: never) => ModuleParts;
}

/**
 * A resource's definition, kept as written (its name a literal, its module's parameter its own type), so
 * the composition root is asked by name for what each module needs.
 */
export const defineResource = <const Definition extends ResourceDefinition>(
  definition: Definition,
): Definition => definition;

/**
 * What the composition root hands each resource with a module, by name: the type check asks for every
 * resource of the list, so a resource listed but not given what it needs does not compile.
 */
export type ModuleNeeds<List extends readonly ResourceDefinition[]> = {
  [Definition in List[number] as Definition extends { module: unknown }
    ? Definition['name']
    : never]: Definition extends { module: (needs: infer Needs) => ModuleParts } ? Needs : never;
};

/** The modules of the list's resources, in the list's order (the order the API serves their routes). */
export function modulesOf<List extends readonly ResourceDefinition[]>(
  list: List,
  needs: ModuleNeeds<List>,
): ResourceModule[] {
  return list.flatMap((definition) => {
    if (!definition.module) return [];
    const given = (needs as Record<string, unknown>)[definition.name] as never;
    return [{ name: definition.name, ...definition.module(given) }];
  });
}

/** What a resource's module factory makes: the module less its name, which its definition gives. */
export type ModuleParts = Omit<ResourceModule, 'name'>;

/** What the server lends a module's `prepare`. */
export interface ModuleHost {
  /** NIMBUS_DATA_DIR: where the server writes the files an operator reads. */
  readonly dataDir: string;
  readonly logger: Logger;
}

export interface ResourceModule {
  /** The resource's folder under src/resources. */
  readonly name: string;
  /** Its routes, with their options bound: registered in each API version scope (/v1, /v2), in module order. */
  readonly routes?: FastifyPluginAsync;
  /** The largest WebSocket message its routes accept; the server takes the largest any module asks for. */
  readonly maxWebSocketPayload?: number;
  /** How it counts what an account uses of its quotas, afresh (`admin recount`, and the uncounted quotas). */
  readonly quotas?: Readonly<Partial<Record<QuotaName, UsageCounter>>>;
  /** Its durable jobs, by job kind (platform/jobs/runner.ts). */
  readonly jobs?: Readonly<Record<string, JobHandler>>;
  /** What it writes in the transaction of every recorded event (platform/events/outbox.ts). */
  readonly onEventRecorded?: EventSubscriber;
  /**
   * The server's start, once the store is migrated and before the API listens (the account: hearing of
   * key revocations, and on a first start the bootstrap account). The admin CLI runs none.
   */
  readonly prepare?: (host: ModuleHost) => Promise<void>;
  /**
   * Once the listeners are up and before the job runner runs: making sure its periodic jobs exist,
   * subscribing its live streams.
   */
  readonly start?: () => Promise<void>;
  /** On close, before the listeners close: what `start` began and would hold them open (live streams). */
  readonly stop?: () => Promise<void>;
  /** Its gauges on the operator metrics port, as Prometheus text; '' when it has none to show now. */
  readonly operatorMetrics?: () => string;
}
