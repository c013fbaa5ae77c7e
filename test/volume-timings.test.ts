/**
 * Volumes over HTTPS, on both stores, with a manual clock and stepped jobs: the simulated timings of
 * create (and formatting), attach, online resize, detach and delete, each event written the moment
 * its change settles.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { SIM_DISK_TIMINGS_MS } from '../src/drivers/simulator/simulator.js';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { createInstance } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import { createVolume, volumeAct } from './helpers/volumes.js';

describe.each(STORES)('Volume timings in simulated time (%s)', (store) => {
  const clock = new ManualClock();
  const server = serverForSuite({ store, clock, steppedJobs: true, env: { NIMBUS_SIM_SPEEDUP: '1' } });
  let key = '';
  beforeAll(async () => {
    key = (await account(server)).key;
  });

  const runDue = () => server.running.backends.jobs.runDue();
  /** Moves the clock to `offsetMs` after `start` in half-second steps, running due jobs at each. */
  async function runUntil(start: number, offsetMs: number): Promise<void> {
    const target = start + offsetMs;
    await runDue();
    while (clock.now().getTime() < target) {
      const now = clock.now().getTime();
      const nextTick = start + (Math.floor((now - start) / 500) + 1) * 500;
      clock.advance(Math.min(nextTick, target) - now);
      await runDue();
    }
  }
  const volume = async (id: string) => (await server.request('GET', `/v1/volumes/${id}`, { key })).body.data;
  const eventAt = async (id: string, type: string) => {
    const reply = await server.request('GET', `/v1/events?resource_id=${id}&type=${type}`, { key });
    return reply.body.data[0]?.timestamp as string | undefined;
  };

  /** Asks for a change at t0, and checks the volume is still `during` 100 ms before `ms`, `after` at `ms`. */
  async function takes(id: string, ms: number, during: string, after: string): Promise<number> {
    const t0 = clock.now().getTime();
    await runUntil(t0, ms - 100);
    expect((await volume(id)).status).toBe(during);
    await runUntil(t0, ms);
    expect((await volume(id)).status).toBe(after);
    return t0;
  }

  it('creates in 4 s, or 7 s when formatting', async () => {
    const raw = await createVolume(server, key);
    const formatted = await createVolume(server, key, { filesystem: 'xfs' });
    const t0 = clock.now().getTime();
    await takes(raw.id, SIM_DISK_TIMINGS_MS.create, 'creating', 'available');
    await runUntil(t0, SIM_DISK_TIMINGS_MS.create + SIM_DISK_TIMINGS_MS.format - 100);
    expect((await volume(formatted.id)).status).toBe('creating');
    await runUntil(t0, SIM_DISK_TIMINGS_MS.create + SIM_DISK_TIMINGS_MS.format);
    expect((await volume(formatted.id)).status).toBe('available');
  });

  it('attaches in 2 s, grows online in 6 s, detaches in 2 s, deletes in 3 s; each event when it settles', async () => {
    const instance = await createInstance(server, key);
    const created = await createVolume(server, key);
    await runUntil(clock.now().getTime(), SIM_DISK_TIMINGS_MS.create);

    expect((await volumeAct(server, key, created.id, 'attach', { instance_id: instance.id })).status).toBe(
      202,
    );
    let t0 = await takes(created.id, SIM_DISK_TIMINGS_MS.attach, 'attaching', 'in-use');
    expect(await eventAt(created.id, 'volume.attached')).toBe(
      new Date(t0 + SIM_DISK_TIMINGS_MS.attach).toISOString(),
    );
    expect((await volume(created.id)).attached_at).toBe(
      new Date(t0 + SIM_DISK_TIMINGS_MS.attach).toISOString(),
    );

    expect((await volumeAct(server, key, created.id, 'resize', { size_gb: 20 })).status).toBe(202);
    t0 = await takes(created.id, SIM_DISK_TIMINGS_MS.resize, 'resizing', 'in-use');
    expect(await eventAt(created.id, 'volume.resized')).toBe(
      new Date(t0 + SIM_DISK_TIMINGS_MS.resize).toISOString(),
    );

    expect((await volumeAct(server, key, created.id, 'detach')).status).toBe(202);
    t0 = await takes(created.id, SIM_DISK_TIMINGS_MS.detach, 'detaching', 'available');
    expect(await eventAt(created.id, 'volume.detached')).toBe(
      new Date(t0 + SIM_DISK_TIMINGS_MS.detach).toISOString(),
    );

    expect((await server.request('DELETE', `/v1/volumes/${created.id}`, { key })).status).toBe(202);
    t0 = clock.now().getTime();
    await runUntil(t0, SIM_DISK_TIMINGS_MS.delete - 100);
    expect((await volume(created.id)).status).toBe('deleting');
    await runUntil(t0, SIM_DISK_TIMINGS_MS.delete);
    expect((await server.request('GET', `/v1/volumes/${created.id}`, { key })).status).toBe(404);
    expect(await eventAt(created.id, 'volume.deleted')).toBe(
      new Date(t0 + SIM_DISK_TIMINGS_MS.delete).toISOString(),
    );
  });
});
