/** Shared steps of the instance suites: create one, act on it, read it and its events, wait for them. */
import { expect } from 'vitest';
import { FAULT_TAG } from '../../src/drivers/simulator/simulator.js';
import { waitFor } from './common.js';
import { UNDER_QEMU } from './driver.js';
import type { Reply, TestServer } from './server.js';

type Json = Record<string, any>;
/** What the reads below need of a server: the in-process TestServer or a child process (ChildServer). */
type Requester = Pick<TestServer, 'request'>;

/** The image instances are made from: under qemu the one `nimbus admin images build` makes. */
export const TEST_IMAGE = UNDER_QEMU ? 'debian-12' : 'ubuntu-24.04';

export const COMPUTE = { instance_type: 'compute-1x', region: 'us-east-1', image: TEST_IMAGE } as const;

/**
 * How long a boot, stop or resize may take before a wait gives up, and how often it looks: a real VM
 * under TCG takes seconds to boot (more on a loaded host), a simulated one milliseconds.
 */
export const CHANGE_TIMEOUT_MS = UNDER_QEMU ? 240_000 : 10_000;
const POLL_MS = UNDER_QEMU ? 200 : 15;

/** Long enough for a simulated boot (8 ms), stop (5 ms) or resize (25 ms) at speed-up 1000 to finish many times over. */
export const SETTLE_MS = 150;

/** Create-body fields that make the simulator misbehave (`stuck-starting`, `stuck-stopping`, `boot-error`). */
export const fault = (name: string) => ({ tags: { [FAULT_TAG]: name } });

let counter = 0;

/** Creates an instance (202) and returns its record; `body` overrides the defaults. */
export async function createInstance(server: TestServer, key: string, body: Record<string, unknown> = {}) {
  counter += 1;
  const reply = await server.request('POST', '/v1/instances', {
    key,
    body: { name: `test-${counter}`, ...COMPUTE, ...body },
  });
  expect(reply.status, reply.text).toBe(202);
  return reply.body.data as Record<string, any>;
}

/**
 * Polls GET /v1/instances/{id} until the instance has `status` (or, for 'gone', answers 404); fails
 * with the last status seen after `timeoutMs`.
 */
export async function waitForStatus(
  server: TestServer,
  key: string,
  id: string,
  status: string,
  timeoutMs = CHANGE_TIMEOUT_MS,
): Promise<Record<string, any>> {
  let last = '';
  return waitFor(
    `instance ${id} to become ${status}`,
    async () => {
      const reply = await server.request('GET', `/v1/instances/${id}`, { key });
      if (status === 'gone' && reply.status === 404) return {};
      last = reply.status === 200 ? reply.body.data.status : `HTTP ${reply.status}`;
      return last === status ? (reply.body.data as Record<string, any>) : undefined;
    },
    { timeoutMs, intervalMs: POLL_MS, lastSeen: () => last },
  );
}

/** POST /v1/instances/{id}/{action}, with a body only when one is given (as `curl -X POST` sends it). */
export function act(
  server: TestServer,
  key: string,
  id: string,
  action: string,
  body?: unknown,
): Promise<Reply> {
  return server.request('POST', `/v1/instances/${id}/${action}`, {
    key,
    ...(body === undefined ? {} : { body }),
  });
}

export async function getInstance(server: Requester, key: string, id: string): Promise<Json> {
  const reply = await server.request('GET', `/v1/instances/${id}`, { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data;
}

/** The instance's events, oldest first. */
export async function eventsOf(server: Requester, key: string, id: string): Promise<Json[]> {
  const reply = await server.request('GET', `/v1/events?resource_id=${id}&limit=100`, { key });
  expect(reply.status, reply.text).toBe(200);
  return [...(reply.body.data as Json[])].reverse();
}

/** Event types of the instance, oldest first. */
export async function eventTypes(server: Requester, key: string, id: string): Promise<string[]> {
  return (await eventsOf(server, key, id)).map((e) => e.type);
}

/** Polls the instance's events until `count` of them have `type`; returns those. */
export async function waitForEvent(
  server: TestServer,
  key: string,
  id: string,
  type: string,
  count = 1,
): Promise<Json[]> {
  let types: string[] = [];
  return waitFor(
    `instance ${id}: ${count}× ${type} event`,
    async () => {
      const events = await eventsOf(server, key, id);
      types = events.map((e) => e.type);
      const matching = events.filter((e) => e.type === type);
      return matching.length >= count ? matching : undefined;
    },
    { timeoutMs: CHANGE_TIMEOUT_MS, intervalMs: POLL_MS, lastSeen: () => types.join(', ') },
  );
}

export async function createRunning(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  const created = await createInstance(server, key, body);
  return waitForStatus(server, key, created.id, 'running');
}

export async function createStopped(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  const running = await createRunning(server, key, body);
  expect((await act(server, key, running.id, 'stop')).status).toBe(202);
  return waitForStatus(server, key, running.id, 'stopped');
}

/** pagination.total_items of the account's instance list. */
export async function listTotal(server: TestServer, key: string): Promise<number> {
  const reply = await server.request('GET', '/v1/instances', { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.pagination.total_items;
}

/**
 * What one create and its boot cost the store, by `counters` (commits, statements, round trips): the
 * request alone, then the boot's job runs alone, stepped by hand on the suite's manual clock; the status
 * reads between runs are left out (read from the store, not through the API, whose key's last use would
 * be written). The suite warms up first (what is made once per account and region), so the count is quiet.
 */
export async function costOfCreateAndBoot<K extends string>(
  server: TestServer,
  clock: { advance(ms: number): void },
  counters: () => Record<K, number>,
): Promise<{ create: Record<K, number>; boot: Record<K, number> }> {
  const since = (before: Record<K, number>, into: Record<K, number>) => {
    const now = counters();
    for (const name of Object.keys(now) as K[]) into[name] = (into[name] ?? 0) + now[name] - before[name];
    return into;
  };
  const { jobs, store } = server.running.backends;
  const beforeCreate = counters();
  const reply = await server.request('POST', '/v1/instances', {
    key: server.rootKey,
    body: { name: 'counted', ...COMPUTE },
  });
  expect(reply.status, reply.text).toBe(202);
  const create = since(beforeCreate, {} as Record<K, number>);

  const boot = {} as Record<K, number>;
  let status = '';
  for (let i = 0; i < 20 && status !== 'running'; i++) {
    const beforeRun = counters();
    await jobs.runDue();
    since(beforeRun, boot);
    const row = await store.db
      .selectFrom('instances')
      .select('status')
      .where('id', '=', reply.body.data.id)
      .executeTakeFirstOrThrow();
    status = row.status;
    if (status !== 'running') clock.advance(100);
  }
  expect(status).toBe('running');
  return { create, boot };
}
