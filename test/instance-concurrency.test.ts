/**
 * Concurrency on instances (issue 3, items 2 and 6), on both stores unless said otherwise:
 * - the quota race: 20 concurrent creates on a free account give exactly 5 instances;
 * - two actions racing on one instance: exactly one wins, the other gets 409, and the instance ends where
 *   the winner sent it; a 409 only ever names a status the action is not allowed from;
 * - identical keyed creates fired at once make one instance;
 * - jobs never run twice: concurrent `runDue()` calls in one process, concurrent claims on the jobs
 *   table, and (PostgreSQL) two replicas on one database, where every instance gets exactly one
 *   `instance.started` and no job is ever run by both replicas at once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import type { JobHandler } from '../src/platform/jobs/runner.js';
import { claimDueJobs, upsertJob } from '../src/platform/jobs/store.js';
import { migrateToLatest, openStore, type Store } from '../src/platform/store/db.js';
import { MIGRATIONS } from '../src/resources.js';
import { createPostgresDatabase, HAVE_POSTGRES, STORES } from './helpers/backends.js';
import { account, expectError, sleep, waitFor } from './helpers/common.js';
import { COMPUTE, createInstance, eventTypes, waitForStatus } from './helpers/instances.js';
import { type Reply, serverForSuite, startTestServer, type TestServer } from './helpers/server.js';

const statusesOf = (replies: Reply[]) => replies.map((r) => r.status).sort();

const count = (types: string[], type: string) => types.filter((t) => t === type).length;

/** A 409 must name a status the action is not allowed from; anything else is a lost race misreported. */
function expectGenuineConflict(reply: Reply): void {
  const { current_status: current, allowed_statuses: allowed } =
    expectError(reply, 409, 'conflict').details ?? {};
  expect(allowed, `409 for a status the action is allowed from: ${reply.text}`).not.toContain(current);
}

describe.each(STORES)('instance concurrency over HTTPS (%s)', (store) => {
  const server = serverForSuite({ store });
  let key = '';

  beforeAll(async () => {
    // waitForStatus polls hard; the account's rate limit must not be what a test measures.
    key = (await account(server)).key;
  });

  async function runningInstance(): Promise<string> {
    const created = await createInstance(server, key);
    await waitForStatus(server, key, created.id, 'running');
    return created.id as string;
  }

  function act(id: string, action: string, body?: unknown): Promise<Reply> {
    if (action === 'delete') return server.request('DELETE', `/v1/instances/${id}`, { key });
    return server.request('POST', `/v1/instances/${id}/${action}`, {
      key,
      ...(body !== undefined ? { body } : {}),
    });
  }

  it('20 concurrent creates on a free account: exactly 5 accepted, 15 quota_exceeded', async () => {
    const account = await server.createAccount({ plan: 'free', perHour: 100_000, burst: 1000 });
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        server.request('POST', '/v1/instances', {
          key: account.key,
          body: { name: `quota-race-${i}`, ...COMPUTE },
        }),
      ),
    );
    const accepted = replies.filter((r) => r.status === 202);
    const refused = replies.filter((r) => r.status === 403);
    expect(accepted, statusesOf(replies).join()).toHaveLength(5);
    expect(refused, statusesOf(replies).join()).toHaveLength(15);
    for (const reply of refused) {
      expect(reply.body.error.code).toBe('quota_exceeded');
      expect(reply.body.error.details).toEqual({ quota: 'instances', limit: 5, used: 5, requested: 1 });
    }

    const list = await server.request('GET', '/v1/instances?limit=100', { key: account.key });
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(5);
    expect(list.body.pagination.total_items).toBe(5);
    expect(list.body.data.map((i: { id: string }) => i.id).sort()).toEqual(
      accepted.map((r) => r.body.data.id).sort(),
    );

    const quota = await server.request('GET', '/v1/account/quota', { key: account.key });
    expect(quota.status).toBe(200);
    const byName = new Map((quota.body.data as { name: string }[]).map((q) => [q.name, q]));
    expect(byName.get('instances')).toEqual({ name: 'instances', limit: 5, used: 5 });
    expect(byName.get('vcpus')).toMatchObject({ used: 5 * 1 });
  });

  it('stop and restart at once: one 202, one 409 conflict, and the instance ends as the winner said', async () => {
    const id = await runningInstance();
    const [stop, restart] = await Promise.all([act(id, 'stop'), act(id, 'restart')]);
    expect(statusesOf([stop!, restart!])).toEqual([202, 409]);
    const types = () => eventTypes(server, key, id);
    if (stop!.status === 202) {
      expectGenuineConflict(restart!);
      await waitForStatus(server, key, id, 'stopped');
      expect(count(await types(), 'instance.stopped')).toBe(1);
      expect(count(await types(), 'instance.restarted')).toBe(0);
    } else {
      expectGenuineConflict(stop!);
      const done = await waitForStatus(server, key, id, 'running');
      expect(done.status).toBe('running');
      expect(count(await types(), 'instance.restarted')).toBe(1);
      expect(count(await types(), 'instance.stopped')).toBe(0);
    }
  });

  it('two stops at once: one 202, one 409 conflict; stopped once', async () => {
    const id = await runningInstance();
    const replies = await Promise.all([act(id, 'stop'), act(id, 'stop')]);
    expect(statusesOf(replies)).toEqual([202, 409]);
    expectGenuineConflict(replies.find((r) => r.status === 409)!);
    await waitForStatus(server, key, id, 'stopped');
    expect(count(await eventTypes(server, key, id), 'instance.stopped')).toBe(1);
  });

  it('resize and restart at once: one 202, one 409 conflict; it ends running the winner’s type', async () => {
    const id = await runningInstance();
    const [resize, restart] = await Promise.all([
      act(id, 'resize', { instance_type: 'compute-2x' }),
      act(id, 'restart'),
    ]);
    expect(statusesOf([resize!, restart!])).toEqual([202, 409]);
    const winner = resize!.status === 202 ? 'resize' : 'restart';
    expectGenuineConflict(winner === 'resize' ? restart! : resize!);
    const done = await waitForStatus(server, key, id, 'running');
    const types = await eventTypes(server, key, id);
    if (winner === 'resize') {
      expect(done.instance_type).toBe('compute-2x');
      expect(count(types, 'instance.resized')).toBe(1);
      expect(count(types, 'instance.restarted')).toBe(0);
    } else {
      expect(done.instance_type).toBe('compute-1x');
      expect(count(types, 'instance.restarted')).toBe(1);
      expect(count(types, 'instance.resized')).toBe(0);
    }
  });

  it('delete and resize at once: the delete is never refused for a status it is allowed from; the instance is gone', async () => {
    // Delete is allowed from stopping (docs/design.md, "Instance states"), so a resize that commits first
    // does not stop it: either resize 409 (it found deleting), or both 202 (the delete came second, from
    // stopping).
    const id = await runningInstance();
    const [del, resize] = await Promise.all([
      act(id, 'delete'),
      act(id, 'resize', { instance_type: 'compute-2x' }),
    ]);
    expect(del!.status, del!.text).toBe(202);
    expect(del!.body.data.status).toBe('deleting');
    if (resize!.status !== 202) {
      expectGenuineConflict(resize!);
      expect(resize!.body.error.details.current_status).toBe('deleting');
    }
    await waitForStatus(server, key, id, 'gone');
    const events = await server.request('GET', `/v1/events?resource_id=${id}&type=instance.deleted`, { key });
    expect(events.body.data).toHaveLength(1);
  });

  it('concurrent PATCHes of one instance are all applied (update is allowed from every status they find)', async () => {
    const id = await runningInstance();
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        server.request('PATCH', `/v1/instances/${id}`, { key, body: { tags: { round: String(i) } } }),
      ),
    );
    for (const reply of replies) {
      if (reply.status === 409) expectGenuineConflict(reply);
      expect(reply.status, reply.text).toBe(200);
    }
    const types = await eventTypes(server, key, id);
    expect(count(types, 'instance.updated')).toBe(8);
  });

  it('identical keyed creates fired at once make one instance', async () => {
    for (let round = 0; round < 3; round++) {
      const name = `idem-race-${store}-${round}-${Date.now()}`;
      const send = () =>
        server.request('POST', '/v1/instances', {
          key,
          body: { name, ...COMPUTE },
          headers: { 'Idempotency-Key': `create-${name}` },
        });
      const replies = await Promise.all([send(), send()]);
      const accepted = replies.filter((r) => r.status === 202);
      expect(accepted.length, statusesOf(replies).join()).toBeGreaterThanOrEqual(1);
      if (accepted.length === 2) {
        // The second is the replay of the first.
        expect(accepted[0]!.body.data.id).toBe(accepted[1]!.body.data.id);
        expect(accepted.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(1);
      } else {
        const other = replies.find((r) => r.status !== 202)!;
        expect(other.status, other.text).toBe(409);
        expect(other.body.error.code).toBe('idempotency_key_in_use');
      }
      const list = await server.request('GET', `/v1/instances?name=${name}`, { key });
      expect(list.body.data).toHaveLength(1);
      expect(list.body.data[0].id).toBe(accepted[0]!.body.data.id);
    }
  });
});

describe.each(STORES)('jobs run once in one process, stepped (%s)', (store) => {
  const clock = new ManualClock();
  const server = serverForSuite({ store, clock, steppedJobs: true });

  it('concurrent runDue() calls run each job exactly once', async () => {
    const { jobs, store: db } = server.running.backends;
    const runs = new Map<string, number>();
    const inFlight = new Set<string>();
    const overlaps: string[] = [];
    jobs.register('test-once', {
      run: async (subject) => {
        if (inFlight.has(subject)) overlaps.push(subject);
        inFlight.add(subject);
        runs.set(subject, (runs.get(subject) ?? 0) + 1);
        await sleep(2);
        inFlight.delete(subject);
        return null;
      },
      giveUp: async () => {},
    });
    // The server's own periodic jobs (the metrics collector, the status relay, billing, …) are due when
    // it starts; run them first, so that the counts below are of this test's 40 jobs alone (with the
    // clock standing still, none of them is due again during the test).
    await jobs.runDue();
    const subjects = Array.from({ length: 40 }, (_, i) => `subject-${i}`);
    await db.db.transaction().execute(async (trx) => {
      for (const subject of subjects) await jobs.enqueue(trx, 'test-once', subject);
    });

    const counts = await Promise.all([jobs.runDue(), jobs.runDue(), jobs.runDue(), jobs.runDue()]);
    // A call made while a run is going returns that run; a run they asked for again finds nothing left.
    expect(Math.max(...counts)).toBe(40);
    expect(await jobs.runDue()).toBe(0);
    expect(overlaps).toEqual([]);
    expect([...runs.keys()].sort()).toEqual([...subjects].sort());
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    const left = await db.db.selectFrom('jobs').select('key').where('kind', '=', 'test-once').execute();
    expect(left).toEqual([]);
  });

  it('instances stepped by concurrent runDue() calls start exactly once each', async () => {
    const { jobs } = server.running.backends;
    const key = server.rootKey;
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await createInstance(server, key)).id);
    await Promise.all([jobs.runDue(), jobs.runDue(), jobs.runDue()]);
    clock.advance(1_000); // every boot (8 ms at the suite's speed-up) is over
    await Promise.all([jobs.runDue(), jobs.runDue(), jobs.runDue()]);
    await jobs.runDue();
    for (const id of ids) {
      const reply = await server.request('GET', `/v1/instances/${id}`, { key });
      expect(reply.body.data.status).toBe('running');
      const types = await eventTypes(server, key, id);
      expect(types).toEqual(['instance.created', 'instance.started']);
    }
  });
});

describe.each(STORES)('claimDueJobs side by side (%s)', (store) => {
  let opened: Store;
  let dataDir = '';
  let dropDatabase: (() => Promise<void>) | null = null;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-claims-'));
    let databaseUrl: string | undefined;
    if (store === 'postgres') {
      const database = await createPostgresDatabase();
      databaseUrl = database.url;
      dropDatabase = database.drop;
    }
    opened = openStore({ databaseUrl, dataDir, poolSize: 8 });
    await migrateToLatest(opened.db, MIGRATIONS);
  });
  afterAll(async () => {
    await opened?.close();
    if (dropDatabase) await dropDatabase();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('concurrent claims over the same due jobs return disjoint sets that cover them all', async () => {
    const now = new Date('2026-03-01T00:00:00Z');
    for (let round = 0; round < 5; round++) {
      const ids: string[] = [];
      for (let i = 0; i < 40; i++) {
        const id = `job_r${round}_${String(i).padStart(2, '0')}`;
        ids.push(id);
        await upsertJob(opened.db, {
          id,
          key: `claim-test:${round}:${i}`,
          kind: 'claim-test',
          subjectId: `s${i}`,
          runAt: new Date(now.getTime() - 1000 + i),
          now,
        });
      }
      const leaseUntil = new Date(now.getTime() + 30_000);
      const owners = ['a', 'b', 'c', 'd'].map((o) => `owner-${round}-${o}`);
      const claimed = await Promise.all(owners.map((o) => claimDueJobs(opened, o, now, leaseUntil, 15)));
      const all = claimed.flat().map((j) => j.id);
      expect(new Set(all).size, 'a job was claimed twice').toBe(all.length);
      expect(all.sort()).toEqual(ids);
      claimed.forEach((jobs, i) => {
        for (const job of jobs) expect(job).toMatchObject({ lease_owner: owners[i], attempts: 1 });
      });
      // Leased, so nobody else can claim them now.
      expect(await claimDueJobs(opened, 'late', now, leaseUntil, 100)).toEqual([]);
      await opened.db.deleteFrom('jobs').where('kind', '=', 'claim-test').execute();
    }
  });
});

describe.skipIf(!HAVE_POSTGRES)('two replicas on one PostgreSQL database', () => {
  let dropDatabase: (() => Promise<void>) | null = null;
  const replicas: TestServer[] = [];

  beforeAll(async () => {
    const database = await createPostgresDatabase();
    dropDatabase = database.drop;
    replicas.push(await startTestServer({ databaseUrl: database.url }));
    replicas.push(await startTestServer({ databaseUrl: database.url }));
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    if (dropDatabase) await dropDatabase();
  });

  it('30 instances created through both: each started exactly once, no job run by both at once', async () => {
    const [a, b] = replicas as [TestServer, TestServer];
    expect(a.rootKey).not.toBe('');
    expect(b.rootKey).toBe('');

    // Each replica's reconciler, wrapped to see every run: a subject run by both at once is a job run twice.
    const inFlight = new Map<string, string>();
    const overlaps: string[] = [];
    const runsBy = new Map<string, number>();
    for (const [name, replica] of [
      ['a', a],
      ['b', b],
    ] as const) {
      const { jobs } = replica.running.backends;
      const inner = jobs.handlerOf('instance');
      if (!inner) throw new Error('no instance reconciler registered');
      const counted: JobHandler = {
        run: async (id) => {
          const other = inFlight.get(id);
          if (other !== undefined) overlaps.push(`${id}: ${other} and ${name}`);
          inFlight.set(id, name);
          runsBy.set(name, (runsBy.get(name) ?? 0) + 1);
          try {
            return await inner.run(id);
          } finally {
            inFlight.delete(id);
          }
        },
        giveUp: (id, error) => inner.giveUp(id, error),
      };
      jobs.register('instance', counted);
    }

    const account = await a.admin<{ account_id: string; api_key: string }>(
      'create-account',
      '--email',
      `replicas-${Date.now()}@example.com`,
      '--plan',
      'professional',
    );
    await a.admin(
      'set-rate-limit',
      '--account',
      account.account_id,
      '--per-hour',
      '1000000',
      '--burst',
      '10000',
    );
    const key = account.api_key;
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (i % 2 === 0 ? a : b).request('POST', '/v1/instances', {
          key,
          body: { name: `replica-${i}`, ...COMPUTE },
        }),
      ),
    );
    for (const reply of created) expect(reply.status, reply.text).toBe(202);
    const ids = created.map((r) => r.body.data.id as string);

    let running = 0;
    await waitFor(
      'all 30 instances running',
      async () => {
        const list = await b.request('GET', '/v1/instances?status=running&limit=1', { key });
        running = list.body.pagination.total_items;
        return running === 30 ? true : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50, lastSeen: () => `${running} running` },
    );

    const started = await a.request('GET', '/v1/events?type=instance.started&limit=100', { key });
    const startedIds = (started.body.data as { resource_id: string }[]).map((e) => e.resource_id);
    expect(startedIds).toHaveLength(30);
    expect([...startedIds].sort()).toEqual([...ids].sort());
    for (const id of ids) {
      expect(await eventTypes(b, key, id)).toEqual(['instance.created', 'instance.started']);
    }
    expect(overlaps).toEqual([]);
    expect(runsBy.get('a') ?? 0, 'replica a ran no job').toBeGreaterThan(0);
    expect(runsBy.get('b') ?? 0, 'replica b ran no job').toBeGreaterThan(0);
  });
});
