/**
 * buildApp assembles the Fastify application without listening, so tests can `inject` and main.ts can
 * attach it to real HTTPS/HTTP servers. Order matters: cross-cutting plugins, then the OpenAPI
 * generator (it must see every route), then routes. Each version scope (/v1, /v2) adds the guard and
 * idempotency hooks, then the routes of every resource module it is given (platform/module.ts); health
 * checks and /docs sit outside them and need no key.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import websocket from '@fastify/websocket';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyServerFactory,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { Authenticator } from '../authenticator.js';
import type { CursorSigner } from '../domain/cursors.js';
import { newId } from '../domain/ids.js';
import type { IdempotencyService } from '../idempotency/idempotency.js';
import type { StateTable } from '../lifecycle/state-table.js';
import type { ResourceModule } from '../module.js';
import type { RateLimitService } from '../rate-limits/rate-limits.js';
import { consoleRoutes } from './console-routes.js';
import { clientErrorHandler, connectRefusalHandler, frameworkErrorHandler } from './early-errors.js';
import { healthRoutes } from './health-routes.js';
import { registerJsonParser } from './json-body.js';
import { cursorLists } from './list-versions.js';
import { registerOpenApi } from './openapi.js';
import { actorPlugin } from './plugins/actor.js';
import { errorsPlugin, notFoundHandler } from './plugins/errors.js';
import { guardPlugin } from './plugins/guard.js';
import { idempotencyPlugin } from './plugins/idempotency.js';
import { observabilityPlugin } from './plugins/observability.js';
import { PARSER_MAX_HEADER_BYTES, SUPPORTED_VERSIONS, transportPlugin } from './plugins/transport.js';
import { upgradesPlugin } from './plugins/upgrades.js';
import { rateHeadersOnUpgrades } from './rate-headers.js';
import { onDemandChildLogger } from './request-logger.js';
import type { RequestMetrics } from './request-metrics.js';
import { ErrorEnvelope, rejectUnknownQuery } from './schemas.js';
import { validatorCompiler } from './validation.js';
import { websocketErrorHandler } from './websocket-faults.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;
/**
 * As long as any URL Node's parser accepts (PARSER_MAX_HEADER_BYTES includes the request line), so the
 * router never refuses a long path segment itself: the route's schema does (naming the field), or the
 * transport's header limit.
 */
const MAX_PARAM_LENGTH = PARSER_MAX_HEADER_BYTES;

/** The WebSocket message limit when no module asks for one. */
const DEFAULT_WEBSOCKET_MAX_PAYLOAD = 16 * 1024;

export interface AppDeps {
  /** The resources served, their routes in every version scope in this order (platform/module.ts). */
  modules: readonly ResourceModule[];
  /** Who a presented API key stands for (the guard). */
  authenticator: Authenticator;
  rateLimits: RateLimitService;
  idempotency: IdempotencyService;
  /** Seals and opens the /v2 list cursors. */
  cursors: CursorSigner;
  /** The state table of every stateful kind, published in the OpenAPI document. */
  stateTables: readonly StateTable<string, string>[];
  logger: Logger;
  metrics: RequestMetrics;
  checkReady: () => Promise<void>;
  trustProxy: boolean | string;
  v1EndOfLife: Date | null;
  /** Creates the server Fastify answers on (main.ts: HTTPS); tests that only `inject` leave it out. */
  serverFactory?: FastifyServerFactory;
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const early = { rateLimits: deps.rateLimits, logger: deps.logger };
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Our own access-log line (plugins/observability.ts) replaces Fastify's two lines per request.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    genReqId: () => newId('request'),
    childLoggerFactory: onDemandChildLogger,
    trustProxy: deps.trustProxy,
    bodyLimit: BODY_LIMIT_BYTES,
    ...(deps.serverFactory ? { serverFactory: deps.serverFactory } : {}),
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: frameworkErrorHandler(early),
    clientErrorHandler: clientErrorHandler(early),
  });

  // Fastify parses text/plain by default; Nimbus speaks JSON only, so other bodies get a clear 400.
  app.removeContentTypeParser('text/plain');
  registerJsonParser(app);
  app.setValidatorCompiler(validatorCompiler());
  app.addHook('onRoute', rejectUnknownQuery);
  app.addSchema(ErrorEnvelope);
  await app.register(errorsPlugin);
  await app.register(transportPlugin, {
    endOfLife: deps.v1EndOfLife ? { v1: deps.v1EndOfLife } : {},
    rateLimits: deps.rateLimits,
  });
  await app.register(observabilityPlugin, { metrics: deps.metrics });
  const documents = await registerOpenApi(app, deps.stateTables);
  // Before the /v1 scope, so its hooks know an upgrade (request.ws) when the guard runs.
  const payloads = deps.modules.flatMap((module) => module.maxWebSocketPayload ?? []);
  await app.register(websocket, {
    options: { maxPayload: payloads.length > 0 ? Math.max(...payloads) : DEFAULT_WEBSOCKET_MAX_PAYLOAD },
    errorHandler: websocketErrorHandler(deps.logger),
  });
  await app.register(upgradesPlugin, early);
  // Node drops a CONNECT unanswered unless the server has a listener for it.
  app.server.on('connect', connectRefusalHandler(early));
  rateHeadersOnUpgrades(app);
  app.setNotFoundHandler(notFoundHandler(app.knownRoutes));

  await app.register(healthRoutes, { checkReady: deps.checkReady });
  // The web console (GET / and /console/…): public, hidden from the OpenAPI document.
  await app.register(consoleRoutes, {});
  // /v1 and /v2 serve the same routes; /v2 adds the previews (list-versions.ts: cursor pagination).
  for (const version of SUPPORTED_VERSIONS) {
    await app.withTypeProvider<TypeBoxTypeProvider>().register(
      async (scope) => {
        await scope.register(guardPlugin, { apiKeys: deps.authenticator, rateLimits: deps.rateLimits });
        await scope.register(actorPlugin);
        await scope.register(idempotencyPlugin, { idempotency: deps.idempotency });
        scope.setNotFoundHandler(notFoundHandler(app.knownRoutes));
        if (version === 'v1') {
          scope.get(
            '/openapi.json',
            {
              schema: { tags: ['operations'], summary: 'This OpenAPI document', hide: true },
              config: { public: true },
            },
            (request, reply) => documents.json.send(request, reply),
          );
        } else {
          cursorLists(scope, deps.cursors);
        }
        // The resources' routes, the same in every API version.
        for (const module of deps.modules) if (module.routes) await scope.register(module.routes);
      },
      { prefix: `/${version}` },
    );
  }
  return app;
}
