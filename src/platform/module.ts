/**
 * What a resource (src/resources/<kind>) hands the platform, which never imports one. Each resource's
 * index.ts makes its module from the services the composition root (src/composition.ts) built for it;
 * the root registers every part where it belongs, the HTTP app serves the routes, and the server
 * (main.ts) runs the start-up hooks of every module in module order. A part a resource does not have is
 * left out.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { QuotaName } from './domain/plans.js';
import type { EventSubscriber } from './events/outbox.js';
import type { JobHandler } from './jobs/runner.js';
import type { UsageCounter } from './quotas/quotas.js';

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
