/**
 * Creates of one account on PostgreSQL run side by side (issue 18, item 4): nothing a create holds while
 * it builds is needed by another create of the account; only the quota counters, written as the
 * transaction's last statement and guarded by the limit, decide who gets the last room.
 *
 * To hold a create open mid-transaction the test takes, on a connection of its own, the advisory lock
 * that a create takes when it sets an address scope up (resources/addresses/address-store.ts ensureScope): the account's
 * first create in a region waits there, after its quota check and before it writes anything the
 * account's other creates write.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { HAVE_POSTGRES } from './helpers/backends.js';
import { account, expectError, sleep, waitFor } from './helpers/common.js';
import { COMPUTE, listTotal } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

const ELSEWHERE = 'eu-central-1';

describe.skipIf(!HAVE_POSTGRES)('Creates of one account in parallel (postgres)', () => {
  const server = serverForSuite({ store: 'postgres' });

  /**
   * Runs `body` while a connection of the test holds the scope set-up lock of the account's private
   * network in `region`; releases it (and the connection) after.
   */
  async function holdingScopeSetUp<T>(accountId: string, region: string, body: () => Promise<T>): Promise<T> {
    const db = server.running.backends.store.db;
    const lockKey = `nimbus:address-scope:private:${accountId}:${region}`;
    return db.connection().execute(async (connection) => {
      await sql`select pg_advisory_lock(hashtext(${lockKey}))`.execute(connection);
      try {
        return await body();
      } finally {
        await sql`select pg_advisory_unlock(hashtext(${lockKey}))`.execute(connection);
      }
    });
  }

  /** Requests waiting for an advisory lock now (the creates held at the scope set-up). */
  async function waitingOnAdvisoryLocks(): Promise<number> {
    const { rows } = await sql<{ waiting: string }>`
      select count(*) as waiting from pg_locks
      where locktype = 'advisory' and not granted
        and database = (select oid from pg_database where datname = current_database())`.execute(
      server.running.backends.store.db,
    );
    return Number(rows[0]?.waiting ?? 0);
  }

  const create = (key: string, name: string, region: string = COMPUTE.region) =>
    server.request('POST', '/v1/instances', { key, body: { ...COMPUTE, name, region } });

  it('a create held open mid-transaction does not hold up the account’s next create', async () => {
    const { id: accountId, key } = await account(server);
    // The account's network in us-east-1 is set up; the held create is its first in ELSEWHERE.
    expect((await create(key, 'first')).status).toBe(202);

    await holdingScopeSetUp(accountId, ELSEWHERE, async () => {
      let heldAnswered = false;
      const held = create(key, 'held', ELSEWHERE).then((reply) => {
        heldAnswered = true;
        return reply;
      });
      await waitFor('the first create in the other region waiting at its scope set-up', async () =>
        (await waitingOnAdvisoryLocks()) >= 1 ? true : undefined,
      );
      // With the account row locked for a whole create (before), this one waited for the held one.
      const started = Date.now();
      const next = await Promise.race([create(key, 'not-held'), sleep(15_000).then(() => null)]);
      expect(next, 'the second create answered while the first was held').not.toBeNull();
      expect(next?.status, next?.text).toBe(202);
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(heldAnswered, 'the held create was still in its transaction').toBe(false);
      // Wrapped: returning the promise itself would wait for it with the lock still taken.
      return { held };
    }).then(async ({ held }) => {
      // Released: the held create finishes too.
      expect((await held).status).toBe(202);
    });
    expect(await listTotal(server, key)).toBe(3);
  });

  it('the last room goes to exactly one of 6 creates that all passed the early quota check', async () => {
    const { id: accountId, key } = await account(server);
    await server.admin('set-quota', '--account', accountId, '--name', 'instances', '--limit', '3');
    expect((await create(key, 'a')).status).toBe(202);
    expect((await create(key, 'b')).status).toBe(202);

    const replies = await holdingScopeSetUp(accountId, ELSEWHERE, async () => {
      // Each reads 2 of 3 used (room for one) before it reaches the scope set-up and waits there.
      const pending = Array.from({ length: 6 }, (_, i) => create(key, `race-${i}`, ELSEWHERE));
      await waitFor(
        'all 6 creates waiting at the scope set-up',
        async () => ((await waitingOnAdvisoryLocks()) >= 6 ? true : undefined),
        { timeoutMs: 15_000 },
      );
      return pending;
    }).then((pending) => Promise.all(pending));

    const accepted = replies.filter((reply) => reply.status === 202);
    expect(accepted, replies.map((reply) => `${reply.status} ${reply.text}`).join('\n')).toHaveLength(1);
    for (const reply of replies.filter((r) => r.status !== 202)) {
      const error = expectError(reply, 403, 'quota_exceeded');
      expect(error.details).toEqual({ quota: 'instances', limit: 3, used: 3, requested: 1 });
    }
    expect(await listTotal(server, key)).toBe(3);
    // The counters hold exactly what committed: vCPUs of three compute-1x, and a recount changes nothing.
    const quota = await server.request('GET', '/v1/account/quota', { key });
    const used = Object.fromEntries(
      (quota.body.data as { name: string; used: number }[]).map((q) => [q.name, q.used]),
    );
    expect(used).toMatchObject({ instances: 3, vcpus: 3 });
    const { accounts } = await server.admin<{
      accounts: { quotas: { name: string; counter: number; counted: number }[] }[];
    }>('recount', '--account', accountId);
    const recount = accounts[0]?.quotas ?? [];
    expect(recount.length).toBeGreaterThan(0);
    for (const row of recount) expect(row.counter, row.name).toBe(row.counted);
  });

  it('volume creates: 8 at once for the last 100 GB of volume_storage_gb, exactly one gets them', async () => {
    const { id: accountId, key } = await account(server);
    await server.admin('set-quota', '--account', accountId, '--name', 'volume_storage_gb', '--limit', '150');
    const first = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'first', size_gb: 50, region: COMPUTE.region },
    });
    expect(first.status, first.text).toBe(202);
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        server.request('POST', '/v1/volumes', {
          key,
          body: { name: `race-${i}`, size_gb: 100, region: COMPUTE.region },
        }),
      ),
    );
    const statuses = replies.map((reply) => reply.status).join(',');
    expect(
      replies.filter((reply) => reply.status === 202),
      statuses,
    ).toHaveLength(1);
    for (const reply of replies.filter((r) => r.status !== 202)) {
      const error = expectError(reply, 403, 'quota_exceeded');
      expect(error.details).toEqual({ quota: 'volume_storage_gb', limit: 150, used: 150, requested: 100 });
    }
    const quota = await server.request('GET', '/v1/account/quota', { key });
    const used = Object.fromEntries(
      (quota.body.data as { name: string; used: number }[]).map((q) => [q.name, q.used]),
    );
    expect(used).toMatchObject({ volumes: 2, volume_storage_gb: 150 });
  });
});
