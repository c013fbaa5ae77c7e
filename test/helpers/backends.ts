/**
 * Which real backends the suites run against. SQLite always. PostgreSQL and Redis (the ones on this
 * machine) whenever they answer; under CI=true they must answer, so a missing service fails the run
 * instead of silently skipping its suites.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { openStore, type Store } from '../../src/platform/store/db.js';

export const POSTGRES_ADMIN_URL =
  process.env.NIMBUS_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.NIMBUS_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const REQUIRED = process.env.CI === 'true';

async function postgresAnswers(): Promise<boolean> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch (error) {
    if (REQUIRED)
      throw new Error(`CI=true but PostgreSQL at ${POSTGRES_ADMIN_URL} does not answer: ${error}`);
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function redisAnswers(): Promise<boolean> {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2000 });
  try {
    await client.connect();
    await client.ping();
    return true;
  } catch (error) {
    if (REQUIRED) throw new Error(`CI=true but Redis at ${REDIS_URL} does not answer: ${error}`);
    return false;
  } finally {
    client.disconnect();
  }
}

export const HAVE_POSTGRES = await postgresAnswers();
export const HAVE_REDIS = await redisAnswers();

export type StoreKind = 'sqlite' | 'postgres';
/** The stores every HTTP integration suite runs against. */
export const STORES: StoreKind[] = HAVE_POSTGRES ? ['sqlite', 'postgres'] : ['sqlite'];

/** A fresh, empty PostgreSQL database for one server (or a group of replicas); drop it when done. */
export async function createPostgresDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `nimbus_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

/**
 * The store of a suite whose servers are child processes or replicas: a PostgreSQL database of its own
 * (made in a beforeAll hook registered here, so call this before the suite's own hooks) and, with
 * `dataDirPrefix`, a fresh data dir. Both are removed after the suite's own afterAll hooks have stopped
 * its servers (vitest runs after-hooks in reverse order of registration).
 */
export function storeForSuite(
  store: StoreKind,
  options: { dataDirPrefix?: string } = {},
): { readonly dataDir: string; readonly databaseUrl: string | undefined } {
  const dataDir = options.dataDirPrefix ? mkdtempSync(path.join(os.tmpdir(), options.dataDirPrefix)) : '';
  let database: { url: string; drop: () => Promise<void> } | null = null;
  beforeAll(async () => {
    if (store === 'postgres') database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    dataDir,
    get databaseUrl() {
      return database?.url;
    },
  };
}

/**
 * A fresh, empty store of `store`'s kind for every case (a migration test's "the schema as it was"):
 * opened in a beforeEach hook registered here (so call this before the suite's own hooks, which then
 * see it), closed and removed with its data dir and PostgreSQL database after each case.
 */
export function storePerCase(store: StoreKind, dataDirPrefix: string): () => Store {
  let current: { store: Store; dataDir: string; drop: (() => Promise<void>) | null } | null = null;
  beforeEach(async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), dataDirPrefix));
    const database = store === 'postgres' ? await createPostgresDatabase() : null;
    current = {
      store: openStore({ dataDir, databaseUrl: database?.url }),
      dataDir,
      drop: database?.drop ?? null,
    };
  });
  afterEach(async () => {
    if (!current) return;
    const { store: opened, dataDir, drop } = current;
    current = null;
    await opened.close();
    await drop?.();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return () => {
    if (!current) throw new Error('storePerCase: the store exists only inside a case and its hooks');
    return current.store;
  };
}

/**
 * The master key of every process on one test database (NIMBUS_SECRET_KEY): PostgreSQL requires one,
 * and replicas of a database must share it, so it is derived from the database's URL.
 */
export function secretKeyFor(databaseUrl: string): string {
  return createHash('sha256').update(`nimbus-test-master-key:${databaseUrl}`).digest('base64');
}

/**
 * The settings a process on `databaseUrl` needs: the URL and, unless `env` names a key of its own,
 * the database's test master key.
 */
export function databaseEnv(
  databaseUrl: string | undefined,
  env: Record<string, string | undefined> = {},
): Record<string, string> {
  if (!databaseUrl) return {};
  const ownKey = env.NIMBUS_SECRET_KEY !== undefined || env.NIMBUS_SECRET_KEY_FILE !== undefined;
  return {
    NIMBUS_DATABASE_URL: databaseUrl,
    ...(ownKey ? {} : { NIMBUS_SECRET_KEY: secretKeyFor(databaseUrl) }),
  };
}

/** A client of the test Redis; tests keep to keys of their own (unique subjects or prefixes). */
export function redisClient(): Redis {
  return new Redis(REDIS_URL);
}
