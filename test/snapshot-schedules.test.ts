/**
 * Backup schedules over HTTPS, on both stores, with a manual clock and stepped jobs: a volume's and an
 * instance's schedule make `scheduled` snapshots at their slots, retention keeps the newest N and never
 * touches manual snapshots, removing a schedule stops it, deleting the source stops it, and a server
 * down across two slots makes one snapshot when it comes back on the same data, not two.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { nextSlot } from '../src/resources/volumes/backup-schedule.js';
import { createPostgresDatabase, STORES } from './helpers/backends.js';
import { account, expectInvalid } from './helpers/common.js';
import { serverForSuite, startTestServer, type TestServer } from './helpers/server.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

type Json = Record<string, any>;

/** What the suites share: the clock, the jobs, and reading snapshots back. */
function steps(server: () => TestServer, clock: ManualClock, key: () => string) {
  const runDue = () => server().running.backends.jobs.runDue();
  return {
    runDue,
    /**
     * Moves the clock by `ms`, then three minutes more a minute at a time, running due jobs after each:
     * copies finish, retention (which waits while a copy is being made) deletes, deletions finish.
     */
    /**
     * Sets the clock to the source's next slot and passes it: from there each pass of a period less
     * three minutes ends three minutes after the next slot, its copy made and retention done. Without
     * it, where a check falls against the source's slot (its minute, from its id) varied run to run.
     */
    async toSlot(sourceId: string, frequency: 'hourly' | 'daily'): Promise<void> {
      clock.set(nextSlot(sourceId, frequency, clock.now()));
      await this.pass(0);
    },
    async pass(ms: number): Promise<void> {
      clock.advance(ms);
      await runDue();
      for (let minute = 0; minute < 3; minute++) {
        clock.advance(MINUTE);
        await runDue();
      }
    },
    async snapshots(query: string): Promise<Json[]> {
      const reply = await server().request('GET', `/v1/snapshots?limit=100&${query}`, { key: key() });
      expect(reply.status, reply.text).toBe(200);
      return reply.body.data;
    },
    async post(pathname: string, body: Json): Promise<Json> {
      const reply = await server().request('POST', pathname, { key: key(), body });
      expect(reply.status, reply.text).toBe(202);
      return reply.body.data;
    },
  };
}

describe.each(STORES)('Backup schedules (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-03-01T00:00:00Z'));
  const server = serverForSuite({ store, clock, steppedJobs: true });
  let key = '';
  beforeAll(async () => {
    key = (await account(server)).key;
  });
  const s = steps(
    () => server,
    clock,
    () => key,
  );

  it('daily, retention 3: the first at its slot to the minute; ten days later exactly 3 scheduled, every manual one kept', async () => {
    // A volume's slot is its own minute of the day (from its id), and the steps before the first check
    // take six minutes of the clock: a volume whose first slot falls within them is given back, and
    // another made (one run in a few hundred drew such an id).
    let volume: Json;
    let slot: Date;
    for (;;) {
      volume = await s.post('/v1/volumes', {
        name: 'db-data',
        size_gb: 10,
        region: 'us-east-1',
        backup_schedule: { frequency: 'daily', retention: 3 },
      });
      expect(volume.backup_schedule).toEqual({ frequency: 'daily', retention: 3 });
      await s.pass(0);
      slot = nextSlot(volume.id, 'daily', new Date(volume.created_at));
      if (slot.getTime() - clock.now().getTime() > 30 * MINUTE) break;
      const deleted = await server.request('DELETE', `/v1/volumes/${volume.id}`, { key });
      expect(deleted.status, deleted.text).toBe(202);
      await s.pass(0);
    }
    const manual = [
      await s.post('/v1/snapshots', { name: 'manual-1', volume_id: volume.id }),
      await s.post('/v1/snapshots', { name: 'manual-2', volume_id: volume.id }),
    ];
    await s.pass(0);

    // Nothing before the slot; one at it.
    clock.set(new Date(slot.getTime() - 1));
    await s.runDue();
    expect(await s.snapshots(`source_volume_id=${volume.id}&kind=scheduled`)).toEqual([]);
    clock.set(slot);
    await s.runDue();
    const [first] = await s.snapshots(`source_volume_id=${volume.id}&kind=scheduled`);
    expect(first).toMatchObject({
      kind: 'scheduled',
      source_volume_id: volume.id,
      created_at: slot.toISOString(),
    });
    expect(first?.name).toMatch(/^db-data-auto-\d{8}-\d{4}$/);
    await s.pass(0);

    for (let day = 1; day <= 10; day++) await s.pass(DAY - 3 * MINUTE);
    const scheduled = await s.snapshots(`source_volume_id=${volume.id}&kind=scheduled`);
    expect(scheduled).toHaveLength(3);
    expect(scheduled.every((snap) => snap.status === 'available')).toBe(true);
    // The newest three: one a day, the last at the tenth slot after the first.
    expect(scheduled.map((snap) => snap.created_at)).toEqual(
      [10, 9, 8].map((n) => new Date(slot.getTime() + n * DAY).toISOString()),
    );
    const manualLeft = await s.snapshots(`source_volume_id=${volume.id}&kind=manual`);
    expect(manualLeft.map((snap) => snap.id).sort()).toEqual(manual.map((snap) => snap.id).sort());
    // Eleven scheduled snapshots were made; eight were deleted by retention, each with its event.
    const events = await server.request('GET', '/v1/events?type=snapshot.deleted&limit=100', { key });
    expect(events.body.data.filter((e: Json) => e.data.source_volume_id === volume.id)).toHaveLength(8);
  });

  it("an instance's schedule (hourly, retention 2) snapshots its root volume; PATCH null stops it", async () => {
    const instance = await s.post('/v1/instances', {
      name: 'web',
      instance_type: 'compute-1x',
      region: 'us-east-1',
      image: 'ubuntu-24.04',
      backup_schedule: { frequency: 'hourly', retention: 2 },
    });
    await s.pass(0);
    await s.toSlot(instance.id, 'hourly');
    for (let hour = 1; hour < 5; hour++) await s.pass(HOUR - 3 * MINUTE);
    const scheduled = await s.snapshots(`source_instance_id=${instance.id}&kind=scheduled`);
    expect(scheduled).toHaveLength(2);
    expect(scheduled[0]).toMatchObject({ source_volume_id: instance.root_volume_id, size_gb: 25 });

    const patched = await server.request('PATCH', `/v1/instances/${instance.id}`, {
      key,
      body: { backup_schedule: null },
    });
    expect(patched.status, patched.text).toBe(200);
    const before = (await s.snapshots(`source_instance_id=${instance.id}`)).length;
    for (let hour = 0; hour < 3; hour++) await s.pass(HOUR);
    expect(await s.snapshots(`source_instance_id=${instance.id}`)).toHaveLength(before);
  });

  it('a volume schedule is set and changed by PATCH; a root volume takes none; deleting the volume ends it', async () => {
    const volume = await s.post('/v1/volumes', { name: 'logs', size_gb: 5, region: 'us-east-1' });
    await s.pass(0);
    const patched = await server.request('PATCH', `/v1/volumes/${volume.id}`, {
      key,
      body: { backup_schedule: { frequency: 'hourly', retention: 1 } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.backup_schedule).toEqual({ frequency: 'hourly', retention: 1 });
    await s.toSlot(volume.id, 'hourly');
    for (let hour = 1; hour < 3; hour++) await s.pass(HOUR - 3 * MINUTE);
    expect(await s.snapshots(`source_volume_id=${volume.id}&kind=scheduled`)).toHaveLength(1);

    expectInvalid(
      await server.request('PATCH', `/v1/volumes/${volume.id}`, {
        key,
        body: { backup_schedule: { frequency: 'monthly', retention: 1 } },
      }),
      'backup_schedule.frequency',
    );
    expectInvalid(
      await server.request('PATCH', `/v1/volumes/${volume.id}`, {
        key,
        body: { backup_schedule: { frequency: 'daily', retention: 91 } },
      }),
      'backup_schedule.retention',
    );
    const instance = await s.post('/v1/instances', {
      name: 'db',
      instance_type: 'compute-1x',
      region: 'us-east-1',
      image: 'ubuntu-24.04',
    });
    expectInvalid(
      await server.request('PATCH', `/v1/volumes/${instance.root_volume_id}`, {
        key,
        body: { backup_schedule: { frequency: 'daily', retention: 1 } },
      }),
      'backup_schedule',
    );

    expect((await server.request('DELETE', `/v1/volumes/${volume.id}`, { key })).status).toBe(202);
    await s.pass(0);
    const count = (await s.snapshots(`source_volume_id=${volume.id}`)).length;
    for (let hour = 0; hour < 2; hour++) await s.pass(HOUR);
    // The snapshots outlive the volume, and no new ones come.
    expect(await s.snapshots(`source_volume_id=${volume.id}`)).toHaveLength(count);
  });
});

describe.each(STORES)('Backup schedules at the snapshots quota (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-05-01T00:00:00Z'));
  const server = serverForSuite({ store, clock, steppedJobs: true });

  it('a slot that would pass the snapshots quota is skipped, and the next slots run once there is room', async () => {
    const { id, key } = await account(server);
    await server.admin('set-quota', '--account', id, '--name', 'snapshots', '--limit', '1');
    const s = steps(
      () => server,
      clock,
      () => key,
    );
    const volume = await s.post('/v1/volumes', {
      name: 'tight',
      size_gb: 5,
      region: 'us-east-1',
      backup_schedule: { frequency: 'hourly', retention: 5 },
    });
    await s.pass(0);
    for (let hour = 0; hour < 3; hour++) await s.pass(HOUR);
    const made = await s.snapshots(`source_volume_id=${volume.id}`);
    expect(made).toHaveLength(1);
    // Room for two more: the next two slots use it.
    await server.admin('set-quota', '--account', id, '--name', 'snapshots', '--limit', '3');
    for (let hour = 0; hour < 3; hour++) await s.pass(HOUR);
    expect(await s.snapshots(`source_volume_id=${volume.id}`)).toHaveLength(3);
  });
});

describe.each(STORES)('A backup slot that cannot be made (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-06-01T00:00:00Z'));
  const server = serverForSuite({ store, clock, steppedJobs: true });

  it('is skipped alone: the other schedules due with it make their snapshots, and the server logs which source failed', async () => {
    const { key } = await account(server);
    const s = steps(
      () => server,
      clock,
      () => key,
    );
    const schedule = { frequency: 'hourly', retention: 5 };
    const broken = await s.post('/v1/volumes', {
      name: 'broken',
      size_gb: 5,
      region: 'us-east-1',
      backup_schedule: schedule,
    });
    const healthy = await s.post('/v1/volumes', {
      name: 'healthy',
      size_gb: 5,
      region: 'us-east-1',
      backup_schedule: schedule,
    });
    await s.pass(0);
    // A row the store can no longer read (damaged by hand): making its snapshot throws.
    await sql`update volumes set tags = ${'{not json'} where id = ${broken.id}`.execute(
      server.running.backends.store.db,
    );
    await s.pass(HOUR);
    // An hour holds one slot of each, or two when a slot falls in the first minutes of the hour.
    expect((await s.snapshots(`source_volume_id=${healthy.id}`)).length).toBeGreaterThanOrEqual(1);
    const failures = server
      .logs()
      .split('\n')
      .filter((line) => line.includes('snapshot-schedules:slot'))
      .map((line) => JSON.parse(line));
    expect(failures.length).toBeGreaterThanOrEqual(1);
    for (const failure of failures) {
      expect(failure).toMatchObject({ level: 40, subject: broken.id, msg: 'job failed' });
      expect(failure.err.message).toContain('JSON');
    }
  });
});

describe.each(STORES)('Backup schedules across a restart (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-04-01T00:00:00Z'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-schedules-'));
  let databaseUrl: string | undefined;
  let drop: (() => Promise<void>) | null = null;
  let server: TestServer | null = null;
  let key = '';
  const live = () => {
    if (!server) throw new Error('no server');
    return server;
  };
  const start = async () => {
    server = await startTestServer({
      store,
      clock,
      steppedJobs: true,
      dataDir,
      ...(databaseUrl ? { databaseUrl } : {}),
    });
  };
  beforeAll(async () => {
    if (store === 'postgres') {
      const database = await createPostgresDatabase();
      databaseUrl = database.url;
      drop = database.drop;
    }
    await start();
    key = (await account(live())).key;
  });
  afterAll(async () => {
    await server?.close();
    await drop?.();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('down across two daily slots: one snapshot when it comes back, then the next slot as usual', async () => {
    const s = steps(live, clock, () => key);
    const volume = await s.post('/v1/volumes', {
      name: 'kept',
      size_gb: 10,
      region: 'us-east-1',
      backup_schedule: { frequency: 'daily', retention: 10 },
    });
    await s.pass(0);
    const slot = nextSlot(volume.id, 'daily', new Date(volume.created_at));
    await live().close();
    server = null;
    // Two slots pass while nothing runs.
    clock.set(new Date(slot.getTime() + DAY + HOUR));
    await start();
    await s.pass(0);
    const made = await s.snapshots(`source_volume_id=${volume.id}&kind=scheduled`);
    expect(made).toHaveLength(1);
    expect(made[0]?.status).toBe('available');
    // The next one at the next slot in the future, not a catch-up.
    clock.set(new Date(slot.getTime() + 2 * DAY - 1));
    await s.runDue();
    expect(await s.snapshots(`source_volume_id=${volume.id}&kind=scheduled`)).toHaveLength(1);
    await s.pass(1);
    expect(await s.snapshots(`source_volume_id=${volume.id}&kind=scheduled`)).toHaveLength(2);
  });
});
