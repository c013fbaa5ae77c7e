/**
 * Restart safety of volumes, on both stores: the real server as a child process (`bin/nimbus serve`) is
 * killed with SIGKILL while a volume is mid-attach and, attached, mid-resize; a new process on the same
 * data dir and database finds the job and the simulated disk in the store and takes the volume to where
 * it was going, with the completion event written exactly once.
 *
 * Between a kill and the next start the test opens the store itself and checks what the dead process
 * left: the volume in its transitional status, the disk mid-change, the job row waiting.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimulatorTables } from '../src/drivers/simulator/machines.js';
import { SIM_DISK_TIMINGS_MS, SIM_TIMINGS_MS } from '../src/drivers/simulator/simulator.js';
import { openStore } from '../src/platform/store/db.js';
import type { Database } from '../src/platform/store/schema.js';
import { STORES, storeForSuite } from './helpers/backends.js';
import { assertBuilt, type ChildServer, spawnServer } from './helpers/child-server.js';
import { waitFor as poll, sleep } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';

/** Attach 1 s, resize 3 s: long enough to kill the server in the middle. */
const SPEEDUP = 2;
const BOOT_MS = SIM_TIMINGS_MS.boot / SPEEDUP;
const CREATE_MS = SIM_DISK_TIMINGS_MS.create / SPEEDUP;
const ATTACH_MS = SIM_DISK_TIMINGS_MS.attach / SPEEDUP;
const RESIZE_MS = SIM_DISK_TIMINGS_MS.resize / SPEEDUP;
/** The runner's default lease (src/platform/jobs/runner.ts), should a kill land inside one. */
const LEASE_MS = 30_000;
const STEP_TIMEOUT_MS = 60_000 + LEASE_MS;

beforeAll(() => {
  // bin/nimbus runs dist/: testing an old build would test old code.
  assertBuilt();
});

describe.concurrent.each(STORES)('volumes: kill -9 mid-change, then a new process (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-volume-durability-' });
  const { dataDir } = suite;
  let server: ChildServer | null = null;
  let key = '';
  let leaseWaitMs = 0;
  const ids = { instance: '', volume: '' };

  async function start(): Promise<void> {
    server = await spawnServer({
      dataDir,
      databaseUrl: suite.databaseUrl,
      env: { NIMBUS_SIM_SPEEDUP: String(SPEEDUP) },
    });
  }

  function live(): ChildServer {
    if (!server) throw new Error('no server is running');
    return server;
  }

  /** SIGKILL, then what the dead process left in the store for the volume. */
  async function killNow(volumeId: string) {
    await live().kill();
    server = null;
    const killedAt = Date.now();
    const opened = openStore({ databaseUrl: suite.databaseUrl, dataDir });
    try {
      const db = opened.db as Kysely<Database>;
      const left = {
        volume: await db
          .selectFrom('volumes')
          .select(['status', 'instance_id', 'device_name', 'size_gb'])
          .where('id', '=', volumeId)
          .executeTakeFirst(),
        disk: await db
          .withTables<SimulatorTables>()
          .selectFrom('sim_volumes')
          .select(['state', 'instance_id', 'size_gb'])
          .where('id', '=', volumeId)
          .executeTakeFirst(),
        job: await db
          .selectFrom('jobs')
          .select(['lease_until'])
          .where('key', '=', `volume:${volumeId}`)
          .executeTakeFirst(),
      };
      leaseWaitMs = left.job?.lease_until ? Math.max(0, Date.parse(left.job.lease_until) - killedAt) : 0;
      return left;
    } finally {
      await opened.close();
    }
  }

  async function get(kind: 'instances' | 'volumes', id: string): Promise<Record<string, any>> {
    const reply = await live().request('GET', `/v1/${kind}/${id}`, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data;
  }

  async function waitFor(kind: 'instances' | 'volumes', id: string, status: string, timeoutMs: number) {
    let last = '';
    return poll(
      `${id} to become ${status}`,
      async () => {
        const record = await get(kind, id);
        last = record.status;
        return last === status ? record : undefined;
      },
      { timeoutMs: timeoutMs + leaseWaitMs, intervalMs: 50, lastSeen: () => `${last}\n${live().output()}` },
    );
  }

  async function eventTypes(id: string): Promise<string[]> {
    const reply = await live().request('GET', `/v1/events?resource_id=${id}&limit=100`, { key });
    expect(reply.status, reply.text).toBe(200);
    return (reply.body.data as { type: string }[]).map((e) => e.type).reverse();
  }

  beforeAll(async () => {
    await start();
    key = live().rootKey;
    const instance = await live().request('POST', '/v1/instances', {
      key,
      body: { name: 'durable-host', ...COMPUTE },
    });
    expect(instance.status, instance.text).toBe(202);
    ids.instance = instance.body.data.id;
    const volume = await live().request('POST', '/v1/volumes', {
      key,
      body: { name: 'durable-data', size_gb: 10, region: COMPUTE.region },
    });
    expect(volume.status, volume.text).toBe(202);
    ids.volume = volume.body.data.id;
    await waitFor('instances', ids.instance, 'running', BOOT_MS + 10_000);
    await waitFor('volumes', ids.volume, 'available', CREATE_MS + 10_000);
  }, STEP_TIMEOUT_MS);

  afterAll(async () => {
    await server?.kill();
  });

  it.sequential(
    'attach: killed while attaching, the next process brings the volume to in-use',
    async () => {
      const reply = await live().request('POST', `/v1/volumes/${ids.volume}/attach`, {
        key,
        body: { instance_id: ids.instance },
      });
      expect(reply.status, reply.text).toBe(202);
      await sleep(ATTACH_MS / 4);

      const left = await killNow(ids.volume);
      expect(left.volume).toMatchObject({
        status: 'attaching',
        instance_id: ids.instance,
        device_name: '/dev/vdb',
      });
      expect(left.disk).toMatchObject({ state: 'attaching', instance_id: ids.instance });
      expect(left.job, 'the reconcile job is in the store').toBeDefined();

      await start();
      const inUse = await waitFor('volumes', ids.volume, 'in-use', ATTACH_MS + 10_000);
      expect(inUse).toMatchObject({ instance_id: ids.instance, device_name: '/dev/vdb' });
      const types = await eventTypes(ids.volume);
      expect(types).toEqual(['volume.created', 'volume.attached']);
    },
    STEP_TIMEOUT_MS,
  );

  it.sequential(
    'online resize: killed while resizing, the next process finishes it, still attached',
    async () => {
      const reply = await live().request('POST', `/v1/volumes/${ids.volume}/resize`, {
        key,
        body: { size_gb: 25 },
      });
      expect(reply.status, reply.text).toBe(202);
      await sleep(RESIZE_MS / 4);

      const left = await killNow(ids.volume);
      expect(left.volume).toMatchObject({ status: 'resizing', size_gb: 25, instance_id: ids.instance });
      expect(left.disk).toMatchObject({ state: 'resizing', size_gb: 25, instance_id: ids.instance });

      await start();
      const grown = await waitFor('volumes', ids.volume, 'in-use', RESIZE_MS + 10_000);
      expect(grown).toMatchObject({ size_gb: 25, instance_id: ids.instance, device_name: '/dev/vdb' });
      expect(await eventTypes(ids.volume)).toEqual(['volume.created', 'volume.attached', 'volume.resized']);
      expect((await get('instances', ids.instance)).status).toBe('running');
    },
    STEP_TIMEOUT_MS,
  );
});
