/**
 * The server: config → backends (the composition root, composition.ts) → HTTP. `startServer` returns
 * once every listener is up, with a `close` that shuts down in order: stop accepting, finish in-flight
 * requests, flush buffered writes, close the store.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { type Backends, openBackends } from './composition.js';
import type { Config } from './platform/config.js';
import type { Clock } from './platform/domain/clock.js';
import { buildApp } from './platform/http/app.js';
import { clientErrorHandler, connectRefusalHandler } from './platform/http/early-errors.js';
import { limitListener, parserOptions } from './platform/http/listener-limits.js';
import { metricsHandler } from './platform/http/metrics-endpoint.js';
import { RequestMetrics } from './platform/http/request-metrics.js';
import { storeMetricsExposition } from './platform/http/store-metrics.js';
import { loadOrCreateTls, TLS_POLICY } from './platform/http/tls.js';
import { createLogger } from './platform/logger.js';

export interface RunningServer {
  app: FastifyInstance;
  backends: Backends;
  logger: Logger;
  httpsPort: number;
  httpPort: number | null;
  metricsPort: number | null;
  metadataPort: number | null;
  certFile: string;
  close(): Promise<void>;
}

/**
 * How long an idle keep-alive connection stays open. Node closes them after 5 s; a reverse proxy or load
 * balancer keeps its pooled connections up to 60 s, and reusing one just as we close it costs its client a
 * 502 or a reset. Longer than the proxy's idle timeout, the proxy always closes first (Fastify's own default).
 */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

function keepIdleConnections<T extends http.Server>(server: T): T {
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  return server;
}

function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

export async function startServer(
  config: Config,
  options: { clock?: Clock; logger?: Logger; steppedJobs?: boolean } = {},
): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel);
  // Each component pushes its shutdown as it starts; they run in reverse, on close or on a failed start.
  const closers: (() => Promise<void>)[] = [];
  const unwind = async () => {
    for (const closeOne of closers.reverse()) await closeOne();
  };
  try {
    const backends = await openBackends(config, {
      ...(options.clock ? { clock: options.clock } : {}),
      steppedJobs: options.steppedJobs === true,
      onJobError: (error, job) =>
        logger.warn(
          { err: error, job: job.kind, subject: job.subject_id, attempts: job.attempts },
          'job failed',
        ),
    });
    closers.push(backends.close);
    const { services, store, redis, modules } = backends;
    for (const module of modules) await module.prepare?.({ dataDir: config.dataDir, logger });

    const tls = await loadOrCreateTls({ dataDir: config.dataDir, files: config.tls, host: config.host });
    if (tls.generated) logger.info({ cert: tls.certFile }, 'generated a self-signed TLS certificate');

    const registry = new Registry();
    const requestMetrics = new RequestMetrics();
    const app = await buildApp({
      modules,
      authenticator: services.apiKeys,
      rateLimits: services.rateLimits,
      idempotency: services.idempotency,
      cursors: services.cursors,
      stateTables: services.stateTables,
      logger,
      metrics: requestMetrics,
      checkReady: async () => {
        await store.ping();
        if (redis) await redis.ping();
      },
      trustProxy: config.trustProxy,
      v1EndOfLife: config.v1EndOfLife,
      serverFactory: (handler) =>
        limitListener(
          keepIdleConnections(
            https.createServer(
              { ...TLS_POLICY, ...parserOptions(config.listener), key: tls.key, cert: tls.cert },
              handler,
            ),
          ),
          config.listener,
          logger,
        ),
    });
    // Fastify's close stops accepting, lets in-flight requests finish, then resolves.
    closers.push(() => app.close());
    await app.listen({
      port: config.httpsPort,
      host: config.host,
      // Fastify names the scheme after its own `https` option, which a serverFactory leaves unset.
      listenTextResolver: (address) => `Server listening at ${address.replace(/^http:/, 'https:')}`,
    });
    const httpsPort = (app.server.address() as AddressInfo).port;

    // Plain HTTP goes through the same app, whose first hook refuses it (or accepts a trusted proxy's).
    let httpPort: number | null = null;
    if (config.httpPort > 0) {
      const plain = limitListener(
        keepIdleConnections(
          http.createServer(parserOptions(config.listener), (req, res) => app.routing(req, res)),
        ),
        config.listener,
        logger,
      );
      plain.on('connect', connectRefusalHandler({ rateLimits: services.rateLimits, logger }));
      // Malformed requests get the envelope here too (the HTTPS server has it through Fastify's option).
      plain.on('clientError', clientErrorHandler({ rateLimits: services.rateLimits, logger }));
      closers.push(() => closeServer(plain));
      httpPort = await listen(plain, config.httpPort, config.host);
    }

    let metricsPort: number | null = null;
    if (config.metricsPort > 0) {
      const metricsServer = http.createServer(
        metricsHandler(config.metricsToken, async () => ({
          contentType: registry.contentType,
          text:
            (await registry.metrics()) +
            requestMetrics.exposition() +
            storeMetricsExposition(store.commitStats()) +
            modules.map((module) => module.operatorMetrics?.() ?? '').join(''),
        })),
      );
      closers.push(() => closeServer(metricsServer));
      metricsPort = await listen(metricsServer, config.metricsPort, '127.0.0.1');
    }

    let metadataPort: number | null = null;
    const { driver } = backends;
    if (config.metadataPort > 0 || driver.serve) {
      const { app: metadata, host: metadataHost, guest } = await backends.metadataService(logger);
      closers.push(() => metadata.close());
      if (config.metadataPort > 0) {
        await metadata.listen({ port: config.metadataPort, host: metadataHost });
        metadataPort = (metadata.server.address() as AddressInfo).port;
      } else await metadata.ready();
      // A driver whose guests are real serves them itself (qemu: their metadata sockets and SSH ports);
      // they reach the same metadata app.
      await driver.serve?.({
        ...backends.guests,
        metadata: guest,
        log: logger,
      });
    }

    // Pushed first: a start that fails must not leave the modules started before it running.
    closers.push(async () => {
      for (const module of [...modules].reverse()) await module.stop?.();
    });
    for (const module of modules) await module.start?.();
    backends.startWorkers();

    const purge = setInterval(() => void services.idempotency.purgeExpired().catch(() => {}), 3600_000);
    purge.unref();
    closers.push(async () => clearInterval(purge));

    logger.info(
      {
        https: `https://${config.host}:${httpsPort}`,
        http: httpPort,
        metrics: metricsPort,
        metadata: metadataPort,
        store: store.kind,
        redis: Boolean(redis),
      },
      'nimbus is serving',
    );

    let closing: Promise<void> | null = null;
    const close = () => {
      closing ??= unwind().then(() => {
        logger.info('nimbus stopped');
        logger.flush();
      });
      return closing;
    };
    return {
      app,
      backends,
      logger,
      httpsPort,
      httpPort,
      metricsPort,
      metadataPort,
      certFile: tls.certFile,
      close,
    };
  } catch (error) {
    await unwind().catch(() => {});
    throw error;
  }
}
