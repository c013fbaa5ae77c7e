/**
 * Restart safety of snapshots, on both stores: the real server as a child process (`bin/nimbus serve`)
 * is killed with SIGKILL while a snapshot is being copied, and again while it is being restored into a
 * new volume; a new process on the same data dir and database finds the jobs and the simulator's rows
 * in the store and finishes both, each completion event written once.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimulatorTables } from '../src/drivers/simulator/machines.js';
import { SIM_DISK_TIMINGS_MS, SIM_SNAPSHOT_TIMINGS_MS } from '../src/drivers/simulator/simulator.js';
import { openStore } from '../src/platform/store/db.js';
import type { Database } from '../src/platform/store/schema.js';
import { STORES, storeForSuite } from './helpers/backends.js';
import { assertBuilt, type ChildServer, spawnServer } from './helpers/child-server.js';
import { waitFor as poll, sleep } from './helpers/common.js';

/** A 40 GB copy takes 2.5 s and its restore 3 s at this speed-up: time enough to kill mid-way. */
const SPEEDUP = 2;
const SIZE_GB = 40;
const COPY_MS = (SIM_SNAPSHOT_TIMINGS_MS.create + SIZE_GB * SIM_SNAPSHOT_TIMINGS_MS.createPerGb) / SPEEDUP;
const RESTORE_MS =
  (SIM_DISK_TIMINGS_MS.create +
    SIM_SNAPSHOT_TIMINGS_MS.restore +
    SIZE_GB * SIM_SNAPSHOT_TIMINGS_MS.restorePerGb) /
  SPEEDUP;
/** The runner's default lease (src/platform/jobs/runner.ts), should a kill land inside one. */
const LEASE_MS = 30_000;
const STEP_TIMEOUT_MS = 60_000 + LEASE_MS;

beforeAll(() => {
  assertBuilt();
});

describe.concurrent.each(STORES)('snapshots: kill -9 mid-change, then a new process (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-snapshot-durability-' });
  const { dataDir } = suite;
  let server: ChildServer | null = null;
  let key = '';
  let leaseWaitMs = 0;
  let volumeId = '';
  let snapshotId = '';

  const start = async () => {
    server = await spawnServer({
      dataDir,
      databaseUrl: suite.databaseUrl,
      env: { NIMBUS_SIM_SPEEDUP: String(SPEEDUP) },
    });
  };
  const live = (): ChildServer => {
    if (!server) throw new Error('no server is running');
    return server;
  };

  /** SIGKILL, then what the dead process left in the store. */
  async function killNow<T extends Record<string, unknown>>(
    read: (db: Kysely<Database>) => Promise<T>,
    jobKey: string,
  ) {
    await live().kill();
    server = null;
    const killedAt = Date.now();
    const opened = openStore({ databaseUrl: suite.databaseUrl, dataDir });
    try {
      const db = opened.db as Kysely<Database>;
      const job = await db
        .selectFrom('jobs')
        .select(['lease_until'])
        .where('key', '=', jobKey)
        .executeTakeFirst();
      leaseWaitMs = job?.lease_until ? Math.max(0, Date.parse(job.lease_until) - killedAt) : 0;
      return { ...(await read(db)), job };
    } finally {
      await opened.close();
    }
  }

  async function waitFor(kind: 'volumes' | 'snapshots', id: string, status: string, timeoutMs: number) {
    let last = '';
    return poll(
      `${id} to become ${status}`,
      async () => {
        const reply = await live().request('GET', `/v1/${kind}/${id}`, { key });
        last = reply.status === 200 ? reply.body.data.status : `HTTP ${reply.status}`;
        return last === status ? reply.body.data : undefined;
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
    const volume = await live().request('POST', '/v1/volumes', {
      key,
      body: { name: 'durable-source', size_gb: SIZE_GB, region: 'us-east-1' },
    });
    expect(volume.status, volume.text).toBe(202);
    volumeId = volume.body.data.id;
    await waitFor('volumes', volumeId, 'available', SIM_DISK_TIMINGS_MS.create / SPEEDUP + 10_000);
  }, STEP_TIMEOUT_MS);

  afterAll(async () => {
    await server?.kill();
  });

  it.sequential(
    'copy: killed while creating, the next process makes it available, snapshot.completed once',
    async () => {
      const reply = await live().request('POST', '/v1/snapshots', {
        key,
        body: { name: 'durable', volume_id: volumeId },
      });
      expect(reply.status, reply.text).toBe(202);
      snapshotId = reply.body.data.id;
      await sleep(COPY_MS / 4);

      const left = await killNow(
        async (db) => ({
          snapshot: await db
            .selectFrom('snapshots')
            .select(['status'])
            .where('id', '=', snapshotId)
            .executeTakeFirst(),
          copy: await db
            .withTables<SimulatorTables>()
            .selectFrom('sim_snapshots')
            .select(['state', 'size_gb'])
            .where('id', '=', snapshotId)
            .executeTakeFirst(),
        }),
        `snapshot:${snapshotId}`,
      );
      expect(left.snapshot).toEqual({ status: 'creating' });
      expect(left.copy).toEqual({ state: 'creating', size_gb: SIZE_GB });
      expect(left.job, 'the reconcile job is in the store').toBeDefined();

      await start();
      const done = await waitFor('snapshots', snapshotId, 'available', COPY_MS + 10_000);
      expect(done.completed_at).not.toBeNull();
      expect(await eventTypes(snapshotId)).toEqual(['snapshot.created', 'snapshot.completed']);
    },
    STEP_TIMEOUT_MS,
  );

  it.sequential(
    'restore: killed while restoring into a new volume, the next process finishes it, snapshot.restored once',
    async () => {
      const reply = await live().request('POST', `/v1/snapshots/${snapshotId}/restore`, {
        key,
        body: { name: 'durable-restored' },
      });
      expect(reply.status, reply.text).toBe(202);
      const restoredId = reply.body.data.volume.id as string;
      // Past the disk's allocation, inside the restore.
      await sleep(SIM_DISK_TIMINGS_MS.create / SPEEDUP + 600);

      const left = await killNow(
        async (db) => ({
          volume: await db
            .selectFrom('volumes')
            .select(['status', 'restore_snapshot_id'])
            .where('id', '=', restoredId)
            .executeTakeFirst(),
        }),
        `volume:${restoredId}`,
      );
      expect(left.volume).toEqual({ status: 'creating', restore_snapshot_id: snapshotId });
      expect(left.job, 'the reconcile job is in the store').toBeDefined();

      await start();
      await waitFor('volumes', restoredId, 'available', RESTORE_MS + 10_000);
      expect(await eventTypes(snapshotId)).toEqual([
        'snapshot.created',
        'snapshot.completed',
        'snapshot.restored',
      ]);
      expect(await eventTypes(restoredId)).toEqual(['volume.created']);
    },
    STEP_TIMEOUT_MS,
  );
});
