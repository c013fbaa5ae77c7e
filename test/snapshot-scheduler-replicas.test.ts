/**
 * Two replicas on one PostgreSQL database run the snapshot scheduler at the same moment, several times
 * over, bypassing the job runner's lease: each due slot still makes exactly one snapshot, because a slot
 * is taken by a guarded update of its `next_due_at` in the transaction that makes the snapshot.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { SCHEDULER_JOB } from '../src/resources/volumes/backup-schedule-book.js';
import { createPostgresDatabase, HAVE_POSTGRES } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const VOLUMES = 30;

describe.runIf(HAVE_POSTGRES)('the snapshot scheduler on two replicas (postgres)', () => {
  const clock = new ManualClock(new Date('2026-06-01T00:00:00Z'));
  const replicas: TestServer[] = [];
  let dropDatabase: (() => Promise<void>) | null = null;

  beforeAll(async () => {
    const database = await createPostgresDatabase();
    dropDatabase = database.drop;
    const env = { NIMBUS_SECRET_KEY: randomBytes(32).toString('base64') };
    for (let i = 0; i < 2; i++) {
      replicas.push(await startTestServer({ databaseUrl: database.url, env, clock, steppedJobs: true }));
    }
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    if (dropDatabase) await dropDatabase();
  });

  it(`${VOLUMES} hourly schedules due at once, both replicas running the scheduler three times: ${VOLUMES} snapshots`, async () => {
    const [a, b] = replicas as [TestServer, TestServer];
    const { key } = await account(a);
    for (let i = 0; i < VOLUMES; i++) {
      const reply = await a.request('POST', '/v1/volumes', {
        key,
        body: {
          name: `r-${i}`,
          size_gb: 1,
          region: 'us-east-1',
          backup_schedule: { frequency: 'hourly', retention: 5 },
        },
      });
      expect(reply.status, reply.text).toBe(202);
    }
    // The volumes become available (a second of simulated time), then their first slots pass.
    await a.running.backends.jobs.runDue();
    clock.advance(1_000);
    await a.running.backends.jobs.runDue();
    clock.advance(3_600_000);
    const scheduler = (replica: TestServer) => {
      const handler = replica.running.backends.jobs.handlerOf(SCHEDULER_JOB.kind);
      if (!handler) throw new Error('no scheduler registered');
      return handler.run(SCHEDULER_JOB.subject);
    };
    await Promise.all([a, b, a, b, a, b].map(scheduler));
    // And through the job runners too, side by side.
    await Promise.all([a.running.backends.jobs.runDue(), b.running.backends.jobs.runDue()]);
    const reply = await b.request('GET', '/v1/snapshots?kind=scheduled&limit=100', { key });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.pagination.total_items).toBe(VOLUMES);
    const sources = new Set(
      reply.body.data.map((snap: { source_volume_id: string }) => snap.source_volume_id),
    );
    expect(sources.size).toBe(VOLUMES);
  });
});
