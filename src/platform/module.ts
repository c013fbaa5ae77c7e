/**
 * What a resource (src/resources/<kind>) hands the platform, which never imports one. Each resource's
 * index.ts makes its module from the services the composition root (src/composition.ts) built for it;
 * the root registers every part where it belongs, and the HTTP app serves the routes. A part a resource
 * does not have is left out.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { QuotaName } from './domain/plans.js';
import type { EventSubscriber } from './events/outbox.js';
import type { JobHandler } from './jobs/runner.js';
import type { UsageCounter } from './quotas/quotas.js';

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
}
