/**
 * Webhooks survive kill -9 (issue 12, item 5), on both stores: a burst of 1,000 events, the server killed
 * while it delivers them, a new process on the same data dir and database, and then every event the store
 * holds reaches the receiver at least once (a delivery cut short is sent again with the same delivery id).
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseEnv, STORES, storeForSuite } from './helpers/backends.js';
import { ROOT, restartableServer } from './helpers/child-server.js';
import { waitFor } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';
import { startReceiver } from './helpers/webhook-receiver.js';

const EVENTS = 1_000;

const receiver = await startReceiver();
afterAll(() => receiver.close());

describe.concurrent.each(STORES)('webhook deliveries through kill -9 (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-webhook-durability-' });
  const { dataDir } = suite;
  const child = restartableServer(suite, {
    env: {
      NIMBUS_SIM_SPEEDUP: '1000',
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      NIMBUS_WEBHOOK_CA_FILE: receiver.caFile,
    },
    atEnd: 'stop',
  });

  /** An account whose rate limit leaves the burst alone, made with the operator command. */
  function admin(...args: string[]): any {
    const run = spawnSync(process.execPath, [path.join(ROOT, 'bin', 'nimbus'), 'admin', ...args, '--json'], {
      cwd: ROOT,
      env: {
        ...process.env,
        NIMBUS_DATA_DIR: dataDir,
        ...databaseEnv(suite.databaseUrl),
      },
      encoding: 'utf8',
    });
    expect(run.status, run.stderr).toBe(0);
    return JSON.parse(run.stdout);
  }

  it(`every one of ${EVENTS} events is delivered at least once across a kill -9`, async () => {
    const live = await child.start();
    const made = admin(
      'create-account',
      '--email',
      `durable-${store}-${Date.now()}@example.com`,
      '--plan',
      'enterprise',
    );
    admin('set-rate-limit', '--account', made.account_id, '--per-hour', '1000000', '--burst', '100000');
    const key = made.api_key as string;
    const at = `/durable-${store}`;
    const hook = await live.request('POST', '/v1/webhooks', {
      key,
      body: { url: `${receiver.origin}${at}`, events: ['instance.updated'] },
    });
    expect(hook.status, hook.text).toBe(201);
    const created = await live.request('POST', '/v1/instances', {
      key,
      body: { name: 'renamed-0', ...COMPUTE },
    });
    expect(created.status, created.text).toBe(202);
    const id = created.body.data.id as string;

    // The burst: renames, each one instance.updated event, 20 at a time, all acknowledged. The receiver
    // takes 50 ms an answer, so the deliveries are still going when the server is killed.
    receiver.answer(at, { status: 200, delayMs: 50 });
    let next = 0;
    let acknowledged = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < EVENTS) {
          next += 1;
          const reply = await live.request('PATCH', `/v1/instances/${id}`, {
            key,
            body: { name: `renamed-${next}` },
          });
          expect(reply.status, reply.text).toBe(200);
          acknowledged += 1;
        }
      }),
    );
    expect(acknowledged).toBe(EVENTS);
    await waitFor(
      'some deliveries before the kill',
      () => (receiver.receivedAt(at).length >= 300 ? true : undefined),
      {
        timeoutMs: 60_000,
      },
    );
    await child.kill();
    expect(receiver.receivedAt(at).length).toBeLessThan(EVENTS);

    const restarted = await child.start();
    // What the store holds is what committed: each of those events must arrive.
    const stored = new Set<string>();
    for (let page = 1; ; page++) {
      const list = await restarted.request(
        'GET',
        `/v1/events?type=instance.updated&resource_id=${id}&limit=100&page=${page}`,
        {
          key,
        },
      );
      expect(list.status, list.text).toBe(200);
      for (const event of list.body.data) stored.add(event.id);
      if (!list.body.pagination.has_next) break;
    }
    expect(stored.size).toBe(EVENTS);
    const receivedIds = () => new Set(receiver.receivedAt(at).map((r) => JSON.parse(r.body).id as string));
    await waitFor(
      'every stored event delivered',
      () => {
        const got = receivedIds();
        return [...stored].every((eventId) => got.has(eventId)) ? true : undefined;
      },
      {
        // A delivery leased by the killed process waits for its lease (30 s) to run out.
        timeoutMs: 90_000,
        intervalMs: 200,
        lastSeen: () => `${[...stored].filter((e) => receivedIds().has(e)).length} of ${stored.size}`,
      },
    );
    // A repeat carries the delivery id of the first try, so the receiver can drop it.
    const byEvent = new Map<string, Set<string>>();
    for (const request of receiver.receivedAt(at)) {
      const eventId = JSON.parse(request.body).id as string;
      byEvent.set(
        eventId,
        (byEvent.get(eventId) ?? new Set()).add(String(request.headers['x-nimbus-delivery'])),
      );
    }
    for (const deliveries of byEvent.values()) expect(deliveries.size).toBe(1);
  }, 240_000);
});
