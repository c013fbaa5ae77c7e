/**
 * Background work on PostgreSQL has connections of its own (issue 18, boots keeping pace): the job runner
 * and what its jobs run (the reconcilers, the simulated machines) use `Store.background`, a pool apart from
 * the requests'. Under a burst of creates the requests' pool has a queue, and when a boot's statements
 * waited in that queue the boots fell behind the creates. Here every connection of the requests' pool is
 * held by the test, and an instance still boots to running.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { HAVE_POSTGRES } from './helpers/backends.js';
import { waitFor } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

/** The requests' pool of a server started without a pool size (platform/store/db.ts). */
const REQUEST_POOL = 10;

describe.skipIf(!HAVE_POSTGRES)('Background work with connections of its own (postgres)', () => {
  // A boot of 2 s (8 s at speed-up 4): it ends while the test holds the requests' pool.
  const server = serverForSuite({ store: 'postgres', env: { NIMBUS_SIM_SPEEDUP: '4' } });

  it("an instance boots while every connection of the requests' pool is held", async () => {
    const { store } = server.running.backends;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding = 0;
    let holders: Promise<void>[] = [];
    const status = async (id: string) =>
      (await sql<{ status: string }>`select status from instances where id = ${id}`.execute(store.background))
        .rows[0]?.status;
    try {
      const created = await server.request('POST', '/v1/instances', {
        key: server.rootKey,
        body: { name: 'boots-anyway', ...COMPUTE },
      });
      expect(created.status, created.text).toBe(202);
      const id = created.body.data.id as string;
      holders = Array.from({ length: REQUEST_POOL }, () =>
        store.db.connection().execute(async () => {
          holding += 1;
          await held;
        }),
      );
      await waitFor('every request connection held', () => (holding === REQUEST_POOL ? true : undefined));
      await waitFor(
        'the instance running',
        async () => ((await status(id)) === 'running' ? true : undefined),
        {
          timeoutMs: 30_000,
        },
      );
    } finally {
      release();
      await Promise.all(holders);
    }
  });
});
