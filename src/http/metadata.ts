/**
 * The instance metadata service (SPEC.md "Instance behaviours" 6): what a guest can ask about itself
 * over plain HTTP, in the style of EC2's link-local service: `/latest/meta-data/<item>` and
 * `/latest/user-data`, answered as text/plain. A real guest is known by the address it calls from; the
 * simulator's guests do not exist, so the caller names its instance in `X-Nimbus-Instance-Id`.
 * Served on its own port (NIMBUS_METADATA_PORT), never on the API's.
 */
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { InstanceMetadata, InstanceService } from '../services/instances.js';

export const INSTANCE_HEADER = 'x-nimbus-instance-id';
const ITEMS = [
  'instance-id',
  'instance-type',
  'public-ipv4',
  'local-ipv4',
  'hostname',
  'block-devices',
] as const;

function text(reply: FastifyReply, status: number, body: string) {
  return reply.code(status).type('text/plain; charset=utf-8').send(body);
}

export async function buildMetadataApp(instances: InstanceService, logger: Logger): Promise<FastifyInstance> {
  // Guests poll this service; only failures are worth a log line, and Fastify logs those itself.
  const app = Fastify({
    loggerInstance: logger.child({ component: 'metadata' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
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
    return text(reply, 200, metadata[item]);
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
