/**
 * Restart safety of snapshots, on both stores: the real server as a child process (`bin/nimbus serve`)
 * is killed with SIGKILL while a snapshot is being copied, and again while it is being restored into a
 * new volume; a new process on the same data dir and database finds the jobs and the simulator's rows
 * in the store and finishes both, each completion event written once.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SimulatorTables } from '../src/drivers/simulator/machines.js';
import { SIM_DISK_TIMINGS_MS, SIM_SNAPSHOT_TIMINGS_MS } from '../src/drivers/simulator/simulator.js';
import { STORES, storeForSuite } from './helpers/backends.js';
import { restartableServer, RESTART_STEP_TIMEOUT_MS as STEP_TIMEOUT_MS } from './helpers/child-server.js';
import { sleep } from './helpers/common.js';
import { eventTypes } from './helpers/instances.js';

/** A 40 GB copy takes 2.5 s and its restore 3 s at this speed-up: time enough to kill mid-way. */
const SPEEDUP = 2;
const SIZE_GB = 40;
const COPY_MS = (SIM_SNAPSHOT_TIMINGS_MS.create + SIZE_GB * SIM_SNAPSHOT_TIMINGS_MS.createPerGb) / SPEEDUP;
const RESTORE_MS =
  (SIM_DISK_TIMINGS_MS.create +
    SIM_SNAPSHOT_TIMINGS_MS.restore +
    SIZE_GB * SIM_SNAPSHOT_TIMINGS_MS.restorePerGb) /
  SPEEDUP;

describe.concurrent.each(STORES)('snapshots: kill -9 mid-change, then a new process (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-snapshot-durability-' });
  const server = restartableServer(suite, { env: { NIMBUS_SIM_SPEEDUP: String(SPEEDUP) } });
  const live = server.live;
  let key = '';
  let volumeId = '';
  let snapshotId = '';

  beforeAll(async () => {
    await server.start();
    key = live().rootKey;
    const volume = await live().request('POST', '/v1/volumes', {
      key,
      body: { name: 'durable-source', size_gb: SIZE_GB, region: 'us-east-1' },
    });
    expect(volume.status, volume.text).toBe(202);
    volumeId = volume.body.data.id;
    await server.waitForStatus(
      `/v1/volumes/${volumeId}`,
      'available',
      SIM_DISK_TIMINGS_MS.create / SPEEDUP + 10_000,
    );
  }, STEP_TIMEOUT_MS);

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

      const { left, jobs } = await server.killAndRead([`snapshot:${snapshotId}`], async (db) => ({
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
      }));
      expect(left.snapshot).toEqual({ status: 'creating' });
      expect(left.copy).toEqual({ state: 'creating', size_gb: SIZE_GB });
      expect(jobs[0], 'the reconcile job is in the store').toBeDefined();

      await server.start();
      const done = await server.waitForStatus(`/v1/snapshots/${snapshotId}`, 'available', COPY_MS + 10_000);
      expect(done.completed_at).not.toBeNull();
      expect(await eventTypes(live(), key, snapshotId)).toEqual(['snapshot.created', 'snapshot.completed']);
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

      const { left, jobs } = await server.killAndRead([`volume:${restoredId}`], async (db) => ({
        volume: await db
          .selectFrom('volumes')
          .select(['status', 'restore_snapshot_id'])
          .where('id', '=', restoredId)
          .executeTakeFirst(),
      }));
      expect(left.volume).toEqual({ status: 'creating', restore_snapshot_id: snapshotId });
      expect(jobs[0], 'the reconcile job is in the store').toBeDefined();

      await server.start();
      await server.waitForStatus(`/v1/volumes/${restoredId}`, 'available', RESTORE_MS + 10_000);
      expect(await eventTypes(live(), key, snapshotId)).toEqual([
        'snapshot.created',
        'snapshot.completed',
        'snapshot.restored',
      ]);
      expect(await eventTypes(live(), key, restoredId)).toEqual(['volume.created']);
    },
    STEP_TIMEOUT_MS,
  );
});
