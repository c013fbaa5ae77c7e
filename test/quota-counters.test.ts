/**
 * The maintained quota counters (platform/quotas/usage-store.ts), on both stores: after 1,000 random creates, deletes and
 * resizes of instances, volumes and snapshots through HTTPS — many refused (a status that does not allow
 * the action, a quota reached), jobs run at random moments — every counter equals a full recount
 * (`admin recount` finds nothing to repair) and `GET /v1/account/quota` shows the counts. A counter
 * damaged by hand is found and repaired by `admin recount`.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES } from './helpers/backends.js';
import { account } from './helpers/common.js';
import { serverForSuite } from './helpers/server.js';

const OPERATIONS = 1_000;
const TYPES = ['compute-1x', 'compute-2x', 'compute-4x', 'memory-2x'];
const REGION = 'us-east-1';

/** A small deterministic generator, so a failure replays with the same workload (mulberry32). */
function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    below: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T | undefined => items[Math.floor(next() * items.length)],
  };
}

interface Recount {
  name: string;
  counter: number;
  counted: number;
}

describe.each(STORES)('Quota counters against a full recount (%s)', (store) => {
  const clock = new ManualClock(new Date('2026-08-01T00:00:00Z'));
  const server = serverForSuite({ store, clock, steppedJobs: true });

  it(`equal the recount after ${OPERATIONS} random creates, deletes and resizes`, async () => {
    const { id: accountId, key } = await account(server);
    // Room for everything but the snapshot quota, so refusals at a limit happen too.
    for (const [name, limit] of [
      ['instances', 200],
      ['vcpus', 2_000],
      ['volumes', 200],
      ['volume_storage_gb', 100_000],
      ['snapshots', 25],
    ] as const) {
      await server.admin('set-quota', '--account', accountId, '--name', name, '--limit', String(limit));
    }
    const call = (method: string, path: string, body?: object) =>
      server.request(method, path, { key, ...(body ? { body } : {}) });
    const idsOf = async (path: string) => {
      const reply = await call('GET', `${path}?limit=100`);
      expect(reply.status, reply.text).toBe(200);
      return reply.body.data.map((item: { id: string }) => item.id) as string[];
    };
    const rng = random(store === 'sqlite' ? 18 : 81);
    const outcomes = new Map<string, number>();

    for (let op = 0; op < OPERATIONS; op++) {
      if (rng.below(5) === 0) {
        clock.advance(rng.below(30_000));
        await server.running.backends.jobs.runDue();
      }
      const roll = rng.below(9);
      let reply: { status: number } | null = null;
      if (roll === 0) {
        reply = await call('POST', '/v1/instances', {
          name: `i-${op}`,
          instance_type: rng.pick(TYPES),
          region: REGION,
          image: 'ubuntu-24.04',
        });
      } else if (roll === 1) {
        const id = rng.pick(await idsOf('/v1/instances'));
        if (id) reply = await call('DELETE', `/v1/instances/${id}`);
      } else if (roll === 2) {
        const id = rng.pick(await idsOf('/v1/instances'));
        if (id) reply = await call('POST', `/v1/instances/${id}/resize`, { instance_type: rng.pick(TYPES) });
      } else if (roll === 3) {
        const id = rng.pick(await idsOf('/v1/instances'));
        if (id) reply = await call('POST', `/v1/instances/${id}/stop`);
      } else if (roll === 4) {
        reply = await call('POST', '/v1/volumes', {
          name: `v-${op}`,
          size_gb: 1 + rng.below(500),
          region: REGION,
        });
      } else if (roll === 5) {
        const id = rng.pick(await idsOf('/v1/volumes'));
        if (id) reply = await call('POST', `/v1/volumes/${id}/resize`, { size_gb: 500 + rng.below(1_000) });
      } else if (roll === 6) {
        const id = rng.pick(await idsOf('/v1/volumes'));
        if (id) reply = await call('DELETE', `/v1/volumes/${id}`);
      } else if (roll === 7) {
        const id = rng.pick(await idsOf('/v1/volumes'));
        if (id) reply = await call('POST', '/v1/snapshots', { volume_id: id, name: `s-${op}` });
      } else {
        const id = rng.pick(await idsOf('/v1/snapshots'));
        if (id) reply = await call('DELETE', `/v1/snapshots/${id}`);
      }
      if (reply) outcomes.set(String(reply.status), (outcomes.get(String(reply.status)) ?? 0) + 1);
      expect(reply?.status ?? 202, 'no 5xx').toBeLessThan(500);
    }
    // Let every change that was accepted finish: deletions purge rows, which is when counters move.
    for (let pass = 0; pass < 10; pass++) {
      clock.advance(60_000);
      await server.running.backends.jobs.runDue();
    }
    // The workload did both: changes accepted and changes refused.
    expect(outcomes.get('202') ?? 0).toBeGreaterThan(200);
    expect(outcomes.get('409') ?? 0).toBeGreaterThan(20);

    const { accounts } = await server.admin<{ accounts: { quotas: Recount[] }[] }>(
      'recount',
      '--account',
      accountId,
    );
    const recount = accounts[0]?.quotas ?? [];
    expect(recount.map((q) => q.name).sort()).toEqual(
      ['gpus', 'instances', 'snapshots', 'vcpus', 'volume_storage_gb', 'volumes'].sort(),
    );
    for (const quota of recount) expect(quota, quota.name).toMatchObject({ counter: quota.counted });
    expect(recount.find((q) => q.name === 'instances')?.counted).toBeGreaterThan(0);

    const shown = await call('GET', '/v1/account/quota');
    expect(shown.status, shown.text).toBe(200);
    for (const quota of recount) {
      expect(shown.body.data.find((q: { name: string }) => q.name === quota.name)?.used, quota.name).toBe(
        quota.counted,
      );
    }
    // A thousand requests one after another, each with its job steps: 10-45 s on two shared cores.
  }, 180_000);

  it('admin recount finds a damaged counter and repairs it', async () => {
    const { id: accountId, key } = await account(server);
    const made = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'counted', size_gb: 40, region: REGION },
    });
    expect(made.status, made.text).toBe(202);
    await sql`update account_usage set used = used + 7 where account_id = ${accountId} and name = 'volume_storage_gb'`.execute(
      server.running.backends.store.db,
    );
    const quota = async () =>
      (await server.request('GET', '/v1/account/quota', { key })).body.data.find(
        (q: { name: string }) => q.name === 'volume_storage_gb',
      ).used;
    expect(await quota()).toBe(47);

    const { accounts } = await server.admin<{ accounts: { quotas: Recount[] }[] }>(
      'recount',
      '--account',
      accountId,
    );
    expect(accounts[0]?.quotas.find((q) => q.name === 'volume_storage_gb')).toEqual({
      name: 'volume_storage_gb',
      counter: 47,
      counted: 40,
    });
    expect(await quota()).toBe(40);
    const again = await server.admin<{ accounts: { quotas: Recount[] }[] }>(
      'recount',
      '--account',
      accountId,
    );
    expect(again.accounts[0]?.quotas.every((q) => q.counter === q.counted)).toBe(true);
  });
});
