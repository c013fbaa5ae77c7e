/**
 * Which real backends the suites run against. SQLite always. PostgreSQL and Redis (the ones on this
 * machine) whenever they answer; under CI=true they must answer, so a missing service fails the run
 * instead of silently skipping its suites.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';

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

/** A client of the test Redis; tests keep to keys of their own (unique subjects or prefixes). */
export function redisClient(): Redis {
  return new Redis(REDIS_URL);
}
