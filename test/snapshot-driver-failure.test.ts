/**
 * A snapshot whose storage backend keeps failing, on both stores: the driver's copy call throws on every
 * attempt (an outage of the backend, injected at the driver boundary), the job retries with backoff, and
 * after the runner's last attempt the snapshot ends `failed` with the driver's reason and one
 * `snapshot.failed` event — never stuck in `creating`. Once the backend is back, new snapshots complete.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { SnapshotSpec } from '../src/drivers/driver.js';
import { ManualClock } from '../src/platform/domain/clock.js';
import { MAX_ATTEMPTS } from '../src/platform/jobs/runner.js';
import { STORES } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { serverForSuite } from './helpers/server.js';

/** Past the runner's longest backoff (60 s), so each pass runs the retry that is due. */
const PASS_MS = 61_000;

describe.each(STORES)('A snapshot whose backend keeps failing (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-07-01T00:00:00Z'));
  const server = serverForSuite({ store, clock, steppedJobs: true });
  const driver = () => server.running.backends.driver;
  const original = { createSnapshot: undefined as undefined | ((spec: SnapshotSpec) => Promise<void>) };
  afterAll(() => {
    if (original.createSnapshot) driver().createSnapshot = original.createSnapshot;
  });

  it(`ends failed after ${MAX_ATTEMPTS} attempts, with the reason and one snapshot.failed event`, async () => {
    const { key } = await account(server);
    const runDue = () => server.running.backends.jobs.runDue();
    const volume = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'flaky', size_gb: 10, region: 'us-east-1' },
    });
    expect(volume.status, volume.text).toBe(202);
    for (let pass = 0; pass < 3; pass++) {
      clock.advance(PASS_MS);
      await runDue();
    }

    let calls = 0;
    original.createSnapshot = driver().createSnapshot.bind(driver());
    driver().createSnapshot = async () => {
      calls += 1;
      throw new Error('storage backend unreachable');
    };
    const made = await server.request('POST', '/v1/snapshots', {
      key,
      body: { volume_id: volume.body.data.id, name: 'doomed' },
    });
    expect(made.status, made.text).toBe(202);
    const id = made.body.data.id;
    await runDue();

    const statusOf = async () => (await server.request('GET', `/v1/snapshots/${id}`, { key })).body.data;
    for (let pass = 0; pass < MAX_ATTEMPTS + 2 && (await statusOf()).status === 'creating'; pass++) {
      clock.advance(PASS_MS);
      await runDue();
    }
    const failed = await statusOf();
    expect(failed).toMatchObject({ status: 'failed' });
    expect(failed.error).toContain('storage backend unreachable');
    expect(failed.completed_at).not.toBeNull();
    expect(calls).toBe(MAX_ATTEMPTS);

    const events = await server.request('GET', `/v1/events?type=snapshot.failed&resource_id=${id}`, { key });
    expect(events.status, events.text).toBe(200);
    expect(events.body.data).toHaveLength(1);
    expect(events.body.data[0].data.error).toContain('storage backend unreachable');

    // The backend is back: the next snapshot of the same volume completes.
    driver().createSnapshot = original.createSnapshot;
    const next = await server.request('POST', '/v1/snapshots', {
      key,
      body: { volume_id: volume.body.data.id, name: 'fine' },
    });
    expect(next.status, next.text).toBe(202);
    for (let pass = 0; pass < 3; pass++) {
      clock.advance(PASS_MS);
      await runDue();
    }
    const fine = (await server.request('GET', `/v1/snapshots/${next.body.data.id}`, { key })).body.data;
    expect(fine.status).toBe('available');
  });
});
