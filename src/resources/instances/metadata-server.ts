/**
 * The instance metadata service (docs/design.md, "Metadata service"): what a guest can ask about itself
 * over plain HTTP, in the style of EC2's link-local service: `/latest/meta-data/<item>` and
 * `/latest/user-data`, answered as text/plain. A real guest is known by where its request came in — its own
 * socket under the user-mode network, its port-secured address on OVN — and the driver hands the request
 * over with that instance named (`serveGuestRequest`). The simulator's guests do not exist, so on the
 * service's own port (NIMBUS_METADATA_PORT, never the API's) the caller names its instance in
 * `X-Nimbus-Instance-Id`.
 *
 * Whoever can reach that port and knows an instance id reads the instance's user data, so the port is on
 * loopback only (metadataHost) and each source address has a budget of requests; a guest's request is
 * counted against its own instance instead (private addresses repeat across accounts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { RateLimitPolicy } from '../../platform/domain/plans.js';
import { MemoryRateCounters } from '../../platform/rate-limits/rate-counters.js';
import type { InstanceMetadata, InstanceService } from './service.js';

export const INSTANCE_HEADER = 'x-nimbus-instance-id';

/** Requests whose instance the driver named: their header is the driver's, not the caller's. */
const namedByDriver = new WeakSet<IncomingMessage>();

/**
 * Answers a guest's request as the instance `instanceId`, which the driver knows from where the request
 * came in; an `X-Nimbus-Instance-Id` the guest sent is replaced.
 */
export function serveGuestRequest(
  app: FastifyInstance,
  instanceId: string,
  request: IncomingMessage,
  response: ServerResponse,
): void {
  request.headers[INSTANCE_HEADER] = instanceId;
  namedByDriver.add(request);
  app.routing(request, response);
}
const ITEMS = [
  'instance-id',
  'instance-type',
  'public-ipv4',
  'local-ipv4',
  'hostname',
  'block-devices',
] as const;

/**
 * Requests per source address: a guest's boot (cloud-init reads a few dozen items) fits in the burst
 * many times over; a loop naming ids one after another gets 429s after it.
 */
export const METADATA_RATE_LIMIT: RateLimitPolicy = { perHour: 36_000, burst: 100 };

function text(reply: FastifyReply, status: number, body: string) {
  return reply.code(status).type('text/plain; charset=utf-8').send(body);
}

/**
 * Where the metadata port listens: NIMBUS_HOST when that is a loopback address, else 127.0.0.1. The
 * port answers whoever names an instance, so it is never bound to an address other hosts reach.
 */
export function metadataHost(host: string): string {
  const loopback = host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
  return loopback ? host : '127.0.0.1';
}

export async function buildMetadataApp(instances: InstanceService, logger: Logger): Promise<FastifyInstance> {
  // Guests poll this service; only failures are worth a log line, and Fastify logs those itself.
  const app = Fastify({
    loggerInstance: logger.child({ component: 'metadata' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
  });

  const counters = new MemoryRateCounters();
  app.addHook('onClose', async () => counters.close());
  app.addHook('onRequest', (request, reply, done) => {
    const subject = namedByDriver.has(request.raw)
      ? `instance:${request.headers[INSTANCE_HEADER]}`
      : (request.socket.remoteAddress ?? 'unknown');
    const decision = counters.decideNow(subject, METADATA_RATE_LIMIT, Date.now(), 1);
    if (decision.allowed) return done();
    reply.header('Retry-After', String(decision.retryAfter));
    void text(reply, 429, `Too many requests from this address: retry in ${decision.retryAfter} seconds\n`);
  });

  // Whatever a caller sends is its own fault, answered in the service's text: never a 5xx for input.
  app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
    const status = error.statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return text(reply, status, `${error.message}\n`);
    }
    reply.log.error({ err: error }, 'metadata request failed');
    return text(reply, 500, 'Internal error\n');
  });

  /** The calling instance's metadata, or the reply already sent when there is none. */
  async function caller(header: unknown, reply: FastifyReply): Promise<InstanceMetadata | null> {
    if (typeof header !== 'string' || header.length === 0) {
      await text(reply, 400, `Missing ${INSTANCE_HEADER} header: name the instance asking\n`);
      return null;
    }
    const metadata = await instances.metadata(header);
    if (!metadata) await text(reply, 404, `No instance ${header}\n`);
    return metadata;
  }

  app.get('/latest/meta-data/', async (request, reply) => {
    if (!(await caller(request.headers[INSTANCE_HEADER], reply))) return reply;
    return text(reply, 200, `${ITEMS.join('\n')}\n`);
  });

  app.get<{ Params: { item: string } }>('/latest/meta-data/:item', async (request, reply) => {
    const metadata = await caller(request.headers[INSTANCE_HEADER], reply);
    if (!metadata) return reply;
    const item = request.params.item as (typeof ITEMS)[number];
    if (!ITEMS.includes(item)) return text(reply, 404, `No metadata item ${request.params.item}\n`);
    const value = metadata[item];
    // An instance created without a public address has no public-ipv4 to tell.
    if (value === null) return text(reply, 404, `This instance has no ${item}\n`);
    return text(reply, 200, value);
  });

  app.get('/latest/user-data', async (request, reply) => {
    const metadata = await caller(request.headers[INSTANCE_HEADER], reply);
    if (!metadata) return reply;
    if (metadata['user-data'] === null) return text(reply, 404, 'This instance has no user data\n');
    return text(reply, 200, metadata['user-data']);
  });

  app.setNotFoundHandler((request, reply) => text(reply, 404, `Not found: ${request.url}\n`));
  return app;
}
