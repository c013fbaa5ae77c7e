/**
 * Instances over HTTPS, on both stores, with a manual clock and stepped jobs: the simulated timings of
 * boot, stop, restart and resize, a stuck boot an hour on, and a deleting instance.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { ALLOWED_FROM, type InstanceAction } from '../src/resources/instances/states.js';
import { STORES } from './helpers/backends.js';
import { account, expectError } from './helpers/common.js';
import { act, createInstance, eventsOf, fault, getInstance } from './helpers/instances.js';
import { type Reply, serverForSuite } from './helpers/server.js';

describe.each(STORES)('Instance timings in simulated time (%s)', (store) => {
  const clock = new ManualClock();
  const server = serverForSuite({ store, clock, steppedJobs: true, env: { NIMBUS_SIM_SPEEDUP: '1' } });
  let key = '';
  beforeAll(async () => {
    key = (await account(server)).key;
  });

  const runDue = () => server.running.backends.jobs.runDue();
  /**
   * Moves the clock to `offsetMs` after `start`, running due jobs at every half second after `start` on
   * the way: every simulated duration is a multiple of that, so each change is seen the moment it settles.
   */
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
  const status = async (id: string) => (await getInstance(server, key, id)).status;

  it('boots in 8 s: starting at 7.9 s, running at 8 s, with the event at that time', async () => {
    const t0 = clock.now().getTime();
    const created = await createInstance(server, key);
    await runUntil(t0, 7_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 8_000);
    expect(await status(created.id)).toBe('running');
    const started = (await eventsOf(server, key, created.id)).find((e) => e.type === 'instance.started');
    expect(started?.timestamp).toBe(new Date(t0 + 8_000).toISOString());
  });

  it('stops in 5 s and starts again in 8 s', async () => {
    const created = await createInstance(server, key);
    await runUntil(clock.now().getTime(), 8_000);
    expect(await status(created.id)).toBe('running');
    let t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'stop')).status).toBe(202);
    await runUntil(t0, 4_900);
    expect(await status(created.id)).toBe('stopping');
    await runUntil(t0, 5_000);
    expect(await status(created.id)).toBe('stopped');
    t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'start')).status).toBe(202);
    await runUntil(t0, 7_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 8_000);
    expect(await status(created.id)).toBe('running');
  });

  it('restarts through stopping (5 s) and starting (8 s) to running', async () => {
    const created = await createInstance(server, key);
    await runUntil(clock.now().getTime(), 8_000);
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'restart')).status).toBe(202);
    await runUntil(t0, 4_500);
    expect(await status(created.id)).toBe('stopping');
    await runUntil(t0, 5_000);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 12_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 13_000);
    expect(await status(created.id)).toBe('running');
    expect((await eventsOf(server, key, created.id)).at(-1)).toMatchObject({
      type: 'instance.restarted',
      timestamp: new Date(t0 + 13_000).toISOString(),
    });
  });

  it('a forced stop in the middle of a resize still finishes the change, stopped, and reports it', async () => {
    const created = await createInstance(server, key, { instance_type: 'compute-2x' });
    await runUntil(clock.now().getTime(), 8_000);
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'resize', { instance_type: 'compute-4x' })).status).toBe(202);
    await runUntil(t0, 10_000);
    const forced = await act(server, key, created.id, 'stop', { force: true });
    expect(forced.status).toBe(202);
    expect(forced.body.data.status).toBe('stopped');
    await runUntil(t0, 60_000);
    const after = await getInstance(server, key, created.id);
    expect(after).toMatchObject({ status: 'stopped', instance_type: 'compute-4x', storage_gb: 100 });
    const types = (await eventsOf(server, key, created.id)).map((e) => e.type);
    expect(types.slice(-2)).toEqual(['instance.stopped', 'instance.resized']);
  });

  it('a resize of a running instance is 30–60 s of downtime (5 s stop + 25 s resize + 8 s boot)', async () => {
    const created = await createInstance(server, key, { instance_type: 'compute-2x' });
    await runUntil(clock.now().getTime(), 8_000);
    expect(await status(created.id)).toBe('running');
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'resize', { instance_type: 'compute-4x' })).status).toBe(202);
    await runUntil(t0, 4_900);
    expect(await status(created.id)).toBe('stopping');
    await runUntil(t0, 29_900);
    expect(await status(created.id)).not.toBe('running');
    await runUntil(t0, 37_900);
    expect(await status(created.id)).toBe('starting');
    await runUntil(t0, 38_000);
    const resized = await getInstance(server, key, created.id);
    expect(resized).toMatchObject({ status: 'running', instance_type: 'compute-4x', storage_gb: 100 });
    const event = (await eventsOf(server, key, created.id)).at(-1);
    expect(event?.type).toBe('instance.resized');
    const downtimeMs = Date.parse(event?.timestamp) - t0;
    expect(downtimeMs).toBeGreaterThanOrEqual(30_000);
    expect(downtimeMs).toBeLessThanOrEqual(60_000);
  });

  it('a resize of a stopped instance takes 25 s and leaves it stopped', async () => {
    const created = await createInstance(server, key, { instance_type: 'compute-2x' });
    await runUntil(clock.now().getTime(), 8_000);
    expect((await act(server, key, created.id, 'stop')).status).toBe(202);
    await runUntil(clock.now().getTime(), 5_000);
    expect(await status(created.id)).toBe('stopped');
    const t0 = clock.now().getTime();
    expect((await act(server, key, created.id, 'resize', { instance_type: 'memory-2x' })).status).toBe(202);
    await runUntil(t0, 25_000);
    const event = (await eventsOf(server, key, created.id)).at(-1);
    expect(event).toMatchObject({ type: 'instance.resized', timestamp: new Date(t0 + 25_000).toISOString() });
    expect(await getInstance(server, key, created.id)).toMatchObject({
      status: 'stopped',
      instance_type: 'memory-2x',
    });
  });

  it('a stuck-starting instance is still starting an hour later; a forced stop is immediate', async () => {
    const created = await createInstance(server, key, fault('stuck-starting'));
    await runUntil(clock.now().getTime(), 10_000);
    clock.advance(3_600_000);
    await runDue();
    expect(await status(created.id)).toBe('starting');
    const forced = await act(server, key, created.id, 'stop', { force: true });
    expect(forced.body.data.status).toBe('stopped');
    expect(await status(created.id)).toBe('stopped');
    await runDue();
    expect(await status(created.id)).toBe('stopped');
  });

  it('every action on a deleting instance is 409; the jobs then remove it', async () => {
    const created = await createInstance(server, key);
    await runUntil(clock.now().getTime(), 8_000);
    const del = await server.request('DELETE', `/v1/instances/${created.id}`, { key });
    expect(del.status, del.text).toBe(202);
    expect(await status(created.id)).toBe('deleting');
    const attempts: [InstanceAction, () => Promise<Reply>][] = [
      ['start', () => act(server, key, created.id, 'start')],
      ['stop', () => act(server, key, created.id, 'stop')],
      ['force_stop', () => act(server, key, created.id, 'stop', { force: true })],
      ['restart', () => act(server, key, created.id, 'restart')],
      ['resize', () => act(server, key, created.id, 'resize', { instance_type: 'compute-2x' })],
      [
        'update',
        () => server.request('PATCH', `/v1/instances/${created.id}`, { key, body: { name: 'late' } }),
      ],
      ['delete', () => server.request('DELETE', `/v1/instances/${created.id}`, { key })],
    ];
    for (const [action, attempt] of attempts) {
      const error = expectError(await attempt(), 409, 'conflict');
      expect(error.details, action).toEqual({
        current_status: 'deleting',
        allowed_statuses: [...ALLOWED_FROM[action]],
      });
    }
    expect(attempts.map(([action]) => action).sort()).toEqual(Object.keys(ALLOWED_FROM).sort());
    await runDue();
    expectError(await server.request('GET', `/v1/instances/${created.id}`, { key }), 404, 'not_found');
  });
});
