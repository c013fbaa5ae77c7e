/**
 * Restart safety (issue 3, item 2), on both stores: the real server as a child process (`bin/nimbus
 * serve`) is killed with SIGKILL while an instance is mid-boot, mid-stop and mid-resize; a new process on
 * the same data dir and database finds the work in the jobs table and the simulated machine in the store,
 * and takes the instance to its target state with its completion event written exactly once.
 *
 * Between a kill and the next start the test opens the store itself and checks what the dead process
 * left: the instance still in its transitional status, the machine mid-change, the job row waiting.
 *
 * Also, in process with a manual clock: a job whose lease is held by another (dead) owner is not run
 * before the lease runs out, and is run right after.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimulatorTables } from '../src/drivers/simulator/machines.js';
import { SIM_TIMINGS_MS } from '../src/drivers/simulator/simulator.js';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES, storeForSuite } from './helpers/backends.js';
import {
  JOB_LEASE_MS as LEASE_MS,
  restartableServer,
  RESTART_STEP_TIMEOUT_MS as STEP_TIMEOUT_MS,
} from './helpers/child-server.js';
import { waitFor as poll, sleep } from './helpers/common.js';
import { COMPUTE, createInstance, eventTypes, getInstance } from './helpers/instances.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/** Boot 2 s, graceful stop 1.25 s, resize 6.25 s: long enough to kill the server in the middle. */
const SPEEDUP = 4;
const BOOT_MS = SIM_TIMINGS_MS.boot / SPEEDUP;
const STOP_MS = SIM_TIMINGS_MS.stop / SPEEDUP;
const RESIZE_MS = SIM_TIMINGS_MS.resize / SPEEDUP;

// The stores run side by side (most of the time is spent waiting for simulated machines); each store's
// steps run in order, on one instance history.
describe.concurrent.each(STORES)('kill -9 mid-transition, then a new process (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-durability-' });
  const server = restartableServer(suite, { env: { NIMBUS_SIM_SPEEDUP: String(SPEEDUP) } });
  const live = server.live;
  let key = '';
  const ids = { booted: '', stopped: '', resized: '' };

  /** SIGKILL, then what the dead process left in the store for each instance, and their jobs. */
  async function killNow(instanceIds: string[]) {
    const { left, jobs } = await server.killAndRead(
      instanceIds.map((id) => `instance:${id}`),
      (db) =>
        Promise.all(
          instanceIds.map(async (id) => ({
            instance: await db
              .selectFrom('instances')
              .select(['status', 'operation', 'instance_type'])
              .where('id', '=', id)
              .executeTakeFirst(),
            machine: await db
              .withTables<SimulatorTables>()
              .selectFrom('sim_machines')
              .select(['state', 'instance_type'])
              .where('id', '=', id)
              .executeTakeFirst(),
          })),
        ),
    );
    return left.map((l, i) => ({ ...l, job: jobs[i] }));
  }

  const statusOf = (id: string) => getInstance(live(), key, id);
  const waitFor = (id: string, status: string, timeoutMs: number) =>
    server.waitForStatus(`/v1/instances/${id}`, status, timeoutMs);

  const count = (types: string[], type: string) => types.filter((t) => t === type).length;

  /** Waits until the instances' jobs are finished and deleted (read through a second connection while the child serves). */
  async function jobsGone(instanceIds: string[]) {
    let left: { key: string }[] = [];
    await poll(
      'the instances’ jobs to be gone',
      async () => {
        left = await server.inspect((db) =>
          db
            .selectFrom('jobs')
            .select('key')
            .where(
              'key',
              'in',
              instanceIds.map((id) => `instance:${id}`),
            )
            .execute(),
        );
        return left.length === 0 ? true : undefined;
      },
      {
        timeoutMs: 5_000,
        intervalMs: 50,
        lastSeen: () => `jobs left behind: ${left.map((j) => j.key).join()}`,
      },
    );
  }

  beforeAll(async () => {
    await server.start();
    key = live().rootKey;
    expect(key, 'the first start writes the bootstrap key').not.toBe('');
  });

  it.sequential(
    'boot: killed while starting, the next process brings the instances to running',
    async () => {
      const created: string[] = [];
      for (const name of ['booted', 'resized'] as const) {
        const reply = await live().request('POST', '/v1/instances', {
          key,
          body: { name: `durable-${name}`, ...COMPUTE },
        });
        expect(reply.status, reply.text).toBe(202);
        expect(reply.body.data.status).toBe('starting');
        ids[name] = reply.body.data.id;
        created.push(reply.body.data.id as string);
      }
      // Long enough for the reconciler to provision the machines and begin their boots, well short of the end.
      await sleep(BOOT_MS / 4);
      for (const id of created) expect((await statusOf(id)).status).toBe('starting');

      const left = await killNow(created);
      for (const l of left) {
        expect(l.instance).toMatchObject({ status: 'starting', operation: 'create' });
        expect(l.machine?.state).toBe('booting');
        expect(l.job, 'the reconcile job is in the store').toBeDefined();
      }

      await server.start();
      for (const id of created) {
        await waitFor(id, 'running', BOOT_MS + 10_000);
        const types = await eventTypes(live(), key, id);
        expect(count(types, 'instance.created'), types.join()).toBe(1);
        expect(count(types, 'instance.started'), types.join()).toBe(1);
        expect(count(types, 'instance.error'), types.join()).toBe(0);
      }
      // The job is done and gone once the instance has settled.
      await jobsGone(created);
    },
    STEP_TIMEOUT_MS,
  );

  it.sequential(
    'graceful stop: killed while stopping, the next process brings the instance to stopped',
    async () => {
      const id = ids.booted;
      expect(id).not.toBe('');
      const reply = await live().request('POST', `/v1/instances/${id}/stop`, { key });
      expect(reply.status, reply.text).toBe(202);
      expect(reply.body.data.status).toBe('stopping');
      await sleep(STOP_MS / 4);
      expect((await statusOf(id)).status).toBe('stopping');

      const [left] = await killNow([id]);
      expect(left?.instance).toMatchObject({ status: 'stopping', operation: 'stop' });
      expect(left?.machine?.state).toBe('stopping');
      expect(left?.job).toBeDefined();

      await server.start();
      await waitFor(id, 'stopped', STOP_MS + 10_000);
      const types = await eventTypes(live(), key, id);
      expect(count(types, 'instance.stopped'), types.join()).toBe(1);
      expect(count(types, 'instance.started'), types.join()).toBe(1);
      expect(types.at(-1)).toBe('instance.stopped');
      await jobsGone([id]);
    },
    STEP_TIMEOUT_MS,
  );

  it.sequential(
    'resize from running: killed while stopping and again while resizing, it ends running the new type',
    async () => {
      const id = ids.resized;
      expect(id).not.toBe('');
      expect((await statusOf(id)).status).toBe('running');
      const reply = await live().request('POST', `/v1/instances/${id}/resize`, {
        key,
        body: { instance_type: 'compute-2x' },
      });
      expect(reply.status, reply.text).toBe(202);
      expect(reply.body.data).toMatchObject({ status: 'stopping', instance_type: 'compute-2x' });
      await sleep(STOP_MS / 4);
      expect((await statusOf(id)).status).toBe('stopping');

      // First kill: the machine is shutting down, still the old type.
      const [first] = await killNow([id]);
      expect(first?.instance).toMatchObject({
        status: 'stopping',
        operation: 'resize',
        instance_type: 'compute-2x',
      });
      expect(first?.machine).toMatchObject({ state: 'stopping', instance_type: 'compute-1x' });

      await server.start();
      // Once the machine is off the instance moves to starting and the machine is resized.
      await waitFor(id, 'starting', STOP_MS + 10_000);
      await sleep(RESIZE_MS / 10);
      expect((await statusOf(id)).status).toBe('starting');

      // Second kill: the machine is being resized.
      const [second] = await killNow([id]);
      expect(second?.instance).toMatchObject({
        status: 'starting',
        operation: 'resize',
        instance_type: 'compute-2x',
      });
      expect(second?.machine).toMatchObject({ state: 'resizing', instance_type: 'compute-2x' });
      expect(second?.job).toBeDefined();

      await server.start();
      const done = await waitFor(id, 'running', RESIZE_MS + BOOT_MS + 10_000);
      expect(done).toMatchObject({ instance_type: 'compute-2x', vcpus: 2 });
      const types = await eventTypes(live(), key, id);
      expect(count(types, 'instance.resized'), types.join()).toBe(1);
      expect(count(types, 'instance.started'), types.join()).toBe(1);
      expect(count(types, 'instance.stopped'), types.join()).toBe(0);
      expect(count(types, 'instance.error'), types.join()).toBe(0);
      expect(types.at(-1)).toBe('instance.resized');
      const resized = (
        await live().request('GET', `/v1/events?resource_id=${id}&type=instance.resized`, { key })
      ).body.data[0];
      expect(resized.data).toMatchObject({ instance_id: id, status: 'running', instance_type: 'compute-2x' });
      await jobsGone([id]);
    },
    STEP_TIMEOUT_MS,
  );
});

describe.each(STORES)('a job leased by a process that died (%s)', (store) => {
  let server: TestServer;
  const clock = new ManualClock();

  beforeAll(async () => {
    server = await startTestServer({ store, clock, steppedJobs: true });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('is not run while the lease lasts, and is run by another runner once it has run out', async () => {
    const { jobs, store: db } = server.running.backends;
    const instance = await createInstance(server, server.rootKey);
    const jobKey = `instance:${instance.id}`;
    const job = () => db.db.selectFrom('jobs').selectAll().where('key', '=', jobKey).executeTakeFirst();
    const machine = () =>
      db.db
        .withTables<SimulatorTables>()
        .selectFrom('sim_machines')
        .selectAll()
        .where('id', '=', instance.id)
        .executeTakeFirst();

    // As a runner that claimed the job and then died would have left it.
    const leaseUntil = new Date(clock.now().getTime() + LEASE_MS);
    await db.db
      .updateTable('jobs')
      .set({ lease_owner: 'runner_dead', lease_until: leaseUntil.toISOString(), attempts: 1 })
      .where('key', '=', jobKey)
      .execute();

    // The server's own periodic jobs (metrics collector, status relay, billing) run in these runDue()
    // calls too, so what is checked is this job's row and machine, not how many jobs ran.
    await jobs.runDue();
    expect(await job()).toMatchObject({ lease_owner: 'runner_dead', attempts: 1 });
    clock.advance(LEASE_MS); // exactly at lease_until: still held
    await jobs.runDue();
    expect(await machine()).toBeUndefined();
    expect(await job()).toMatchObject({ lease_owner: 'runner_dead' });
    const stillStarting = await server.request('GET', `/v1/instances/${instance.id}`, {
      key: server.rootKey,
    });
    expect(stillStarting.body.data.status).toBe('starting');

    clock.advance(1); // 30 001 ms after the claim: the lease has run out
    await jobs.runDue();
    expect(await machine()).toMatchObject({ state: 'booting' });
    const waiting = await job();
    expect(waiting).toMatchObject({ lease_owner: null, lease_until: null, attempts: 0 });

    // The boot (8 ms at the suite's speed-up) settles at the next run.
    clock.advance(SIM_TIMINGS_MS.boot / server.config.simSpeedup);
    await jobs.runDue();
    expect(await job()).toBeUndefined();
    const running = await server.request('GET', `/v1/instances/${instance.id}`, { key: server.rootKey });
    expect(running.body.data.status).toBe('running');
    const events = await server.request('GET', `/v1/events?resource_id=${instance.id}`, {
      key: server.rootKey,
    });
    const types = (events.body.data as { type: string }[]).map((e) => e.type);
    expect(types.filter((t) => t === 'instance.started')).toHaveLength(1);
  });
});
