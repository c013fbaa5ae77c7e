/** The PostgreSQL store when the database closes its connections under it (restart, failover, terminate). */
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../src/platform/store/db.js';
import { createPostgresDatabase, HAVE_POSTGRES, POSTGRES_ADMIN_URL } from './helpers/backends.js';
import { waitFor } from './helpers/common.js';

describe.skipIf(!HAVE_POSTGRES)('the PostgreSQL store', () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let store: Store;

  beforeAll(async () => {
    database = await createPostgresDatabase();
    store = openStore({ dataDir: '', databaseUrl: database.url });
  });

  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  async function terminateBackends(): Promise<number> {
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await admin.connect();
    try {
      const name = new URL(database.url).pathname.slice(1);
      const killed = await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
        [name],
      );
      return killed.rowCount ?? 0;
    } finally {
      await admin.end();
    }
  }

  // A connection checked out by a transaction, between two of its statements, has no pool listener and
  // no query to fail: its 'error' event used to be uncaught and took the whole process down (vitest
  // reports an uncaught exception as a failed run).
  it('fails only the transaction whose connection is terminated, and serves the next query', async () => {
    const outcome = await store.db
      .transaction()
      .execute(async (trx) => {
        await sql`select 1`.execute(trx);
        expect(await terminateBackends()).toBeGreaterThan(0);
        await waitFor('the connection to close', async () => {
          try {
            await sql`select 1`.execute(trx);
            return undefined;
          } catch {
            return true;
          }
        });
        return 'committed';
      })
      .catch((error: Error) => error.message);
    expect(outcome).not.toBe('committed');
    const after = await waitFor('a query on a fresh connection', async () => {
      try {
        return (await sql<{ answer: number }>`select 1 as answer`.execute(store.db)).rows;
      } catch {
        return undefined;
      }
    });
    expect(after).toEqual([{ answer: 1 }]);
  });

  it('replaces idle connections the database closed', async () => {
    await sql`select 1`.execute(store.db);
    expect(await terminateBackends()).toBeGreaterThan(0);
    const after = await waitFor('a query on a fresh connection', async () => {
      try {
        return (await sql<{ answer: number }>`select 2 as answer`.execute(store.db)).rows;
      } catch {
        return undefined;
      }
    });
    expect(after).toEqual([{ answer: 2 }]);
  });
});
