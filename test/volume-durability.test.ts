/**
 * Restart safety of volumes, on both stores: the real server as a child process (`bin/nimbus serve`) is
 * killed with SIGKILL while a volume is mid-attach and, attached, mid-resize; a new process on the same
 * data dir and database finds the job and the simulated disk in the store and takes the volume to where
 * it was going, with the completion event written exactly once.
 *
 * Between a kill and the next start the test opens the store itself and checks what the dead process
 * left: the volume in its transitional status, the disk mid-change, the job row waiting.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SimulatorTables } from '../src/drivers/simulator/machines.js';
import { SIM_DISK_TIMINGS_MS, SIM_TIMINGS_MS } from '../src/drivers/simulator/simulator.js';
import { STORES, storeForSuite } from './helpers/backends.js';
import { restartableServer, RESTART_STEP_TIMEOUT_MS as STEP_TIMEOUT_MS } from './helpers/child-server.js';
import { sleep } from './helpers/common.js';
import { COMPUTE, eventTypes, getInstance } from './helpers/instances.js';

/** Attach 1 s, resize 3 s: long enough to kill the server in the middle. */
const SPEEDUP = 2;
const BOOT_MS = SIM_TIMINGS_MS.boot / SPEEDUP;
const CREATE_MS = SIM_DISK_TIMINGS_MS.create / SPEEDUP;
const ATTACH_MS = SIM_DISK_TIMINGS_MS.attach / SPEEDUP;
const RESIZE_MS = SIM_DISK_TIMINGS_MS.resize / SPEEDUP;

describe.concurrent.each(STORES)('volumes: kill -9 mid-change, then a new process (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-volume-durability-' });
  const server = restartableServer(suite, { env: { NIMBUS_SIM_SPEEDUP: String(SPEEDUP) } });
  const live = server.live;
  let key = '';
  const ids = { instance: '', volume: '' };

  /** SIGKILL, then what the dead process left in the store for the volume. */
  function killNow(volumeId: string) {
    return server.killAndRead([`volume:${volumeId}`], async (db) => ({
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
    }));
  }

  beforeAll(async () => {
    await server.start();
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
    await server.waitForStatus(`/v1/instances/${ids.instance}`, 'running', BOOT_MS + 10_000);
    await server.waitForStatus(`/v1/volumes/${ids.volume}`, 'available', CREATE_MS + 10_000);
  }, STEP_TIMEOUT_MS);

  it.sequential(
    'attach: killed while attaching, the next process brings the volume to in-use',
    async () => {
      const reply = await live().request('POST', `/v1/volumes/${ids.volume}/attach`, {
        key,
        body: { instance_id: ids.instance },
      });
      expect(reply.status, reply.text).toBe(202);
      await sleep(ATTACH_MS / 4);

      const { left, jobs } = await killNow(ids.volume);
      expect(left.volume).toMatchObject({
        status: 'attaching',
        instance_id: ids.instance,
        device_name: '/dev/vdb',
      });
      expect(left.disk).toMatchObject({ state: 'attaching', instance_id: ids.instance });
      expect(jobs[0], 'the reconcile job is in the store').toBeDefined();

      await server.start();
      const inUse = await server.waitForStatus(`/v1/volumes/${ids.volume}`, 'in-use', ATTACH_MS + 10_000);
      expect(inUse).toMatchObject({ instance_id: ids.instance, device_name: '/dev/vdb' });
      const types = await eventTypes(live(), key, ids.volume);
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

      const { left } = await killNow(ids.volume);
      expect(left.volume).toMatchObject({ status: 'resizing', size_gb: 25, instance_id: ids.instance });
      expect(left.disk).toMatchObject({ state: 'resizing', size_gb: 25, instance_id: ids.instance });

      await server.start();
      const grown = await server.waitForStatus(`/v1/volumes/${ids.volume}`, 'in-use', RESIZE_MS + 10_000);
      expect(grown).toMatchObject({ size_gb: 25, instance_id: ids.instance, device_name: '/dev/vdb' });
      expect(await eventTypes(live(), key, ids.volume)).toEqual([
        'volume.created',
        'volume.attached',
        'volume.resized',
      ]);
      expect((await getInstance(live(), key, ids.instance)).status).toBe('running');
    },
    STEP_TIMEOUT_MS,
  );
});
