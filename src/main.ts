/**
 * Composition root: config → store → services → HTTP. Nothing else wires components together.
 * `startServer` returns once every listener is up, with a `close` that shuts down in order: stop
 * accepting, finish in-flight requests, flush buffered writes, close the store.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import type { Config } from './config.js';
import { type Clock, systemClock } from './domain/clock.js';
import { type Broadcaster, LocalBroadcaster, RedisBroadcaster } from './events/broadcast.js';
import { buildApp } from './http/app.js';
import { httpMetrics } from './http/plugins/observability.js';
import { loadOrCreateTls } from './http/tls.js';
import { createLogger } from './logger.js';
import { bootstrapAccount } from './services/bootstrap.js';
import { createServices, type Services } from './services/index.js';
import { migrateToLatest, openStore, type Store } from './store/db.js';
import { MemoryRateCounters, type RateCounters, RedisRateCounters } from './store/rate-counters.js';

export const BOOTSTRAP_KEY_FILE = 'bootstrap-api-key';

export interface Backends {
  store: Store;
  redis: Redis | null;
  broadcaster: Broadcaster;
  rateCounters: RateCounters;
  services: Services;
  close(): Promise<void>;
}

/** Store, Redis and services, as the server and the admin CLI both need them. */
export async function openBackends(config: Config, clock: Clock = systemClock): Promise<Backends> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const store = openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(store.db);
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 })
    : null;
  if (redis) await redis.connect();
  const broadcaster = redis ? new RedisBroadcaster(redis) : new LocalBroadcaster();
  const rateCounters = redis ? new RedisRateCounters(redis) : new MemoryRateCounters();
  const services = createServices({
    store,
    clock,
    broadcaster,
    rateCounters,
    authCacheMs: config.authCacheMs,
  });
  return {
    store,
    redis,
    broadcaster,
    rateCounters,
    services,
    close: async () => {
      await services.apiKeys.stop();
      await rateCounters.close();
      await broadcaster.close();
      if (redis) await redis.quit();
      await store.close();
    },
  };
}

export interface RunningServer {
  app: FastifyInstance;
  backends: Backends;
  logger: Logger;
  httpsPort: number;
  httpPort: number | null;
  metricsPort: number | null;
  certFile: string;
  close(): Promise<void>;
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
  options: { clock?: Clock; logger?: Logger } = {},
): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const backends = await openBackends(config, options.clock);
  const { services, store, redis } = backends;
  await services.apiKeys.start();

  const bootstrap = await bootstrapAccount(store, services.accounts);
  if (bootstrap) {
    const file = path.join(config.dataDir, BOOTSTRAP_KEY_FILE);
    writeFileSync(file, `${bootstrap.apiKey}\n`, { mode: 0o600 });
    chmodSync(file, 0o600);
    logger.info(
      { account_id: bootstrap.accountId, file },
      'created the bootstrap account; its API key is in this file',
    );
  }

  const tls = await loadOrCreateTls({ dataDir: config.dataDir, files: config.tls, host: config.host });
  if (tls.generated) logger.info({ cert: tls.certFile }, 'generated a self-signed TLS certificate');

  const registry = new Registry();
  const app = await buildApp({
    services,
    logger,
    metrics: httpMetrics(registry),
    checkReady: async () => {
      await store.ping();
      if (redis) await redis.ping();
    },
    trustProxy: config.trustProxy,
    v1EndOfLife: config.v1EndOfLife,
    serverFactory: (handler) => https.createServer({ key: tls.key, cert: tls.cert }, handler),
  });
  await app.listen({ port: config.httpsPort, host: config.host });
  const httpsPort = (app.server.address() as AddressInfo).port;

  // Plain HTTP goes through the same app, whose first hook refuses it (or accepts a trusted proxy's).
  const plain = config.httpPort > 0 ? http.createServer((req, res) => app.routing(req, res)) : null;
  const httpPort = plain ? await listen(plain, config.httpPort, config.host) : null;

  const metricsServer =
    config.metricsPort > 0
      ? http.createServer(async (req, res) => {
          if (req.url !== '/metrics') {
            res.writeHead(404).end();
            return;
          }
          res.writeHead(200, { 'Content-Type': registry.contentType }).end(await registry.metrics());
        })
      : null;
  const metricsPort = metricsServer ? await listen(metricsServer, config.metricsPort, '127.0.0.1') : null;

  const purge = setInterval(() => void services.idempotency.purgeExpired().catch(() => {}), 3600_000);
  purge.unref();

  logger.info(
    {
      https: `https://${config.host}:${httpsPort}`,
      http: httpPort,
      metrics: metricsPort,
      store: store.kind,
      redis: Boolean(redis),
    },
    'nimbus is serving',
  );

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      clearInterval(purge);
      if (plain) await closeServer(plain);
      await app.close();
      if (metricsServer) await closeServer(metricsServer);
      await backends.close();
      logger.info('nimbus stopped');
      logger.flush();
    })();
    return closing;
  };
  return { app, backends, logger, httpsPort, httpPort, metricsPort, certFile: tls.certFile, close };
}
