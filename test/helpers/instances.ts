/** Shared steps of the instance suites: create one, and wait for it to reach a status. */
import { expect } from 'vitest';
import type { TestServer } from './server.js';

export const COMPUTE = { instance_type: 'compute-1x', region: 'us-east-1', image: 'ubuntu-24.04' } as const;

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
  timeoutMs = 10_000,
): Promise<Record<string, any>> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    const reply = await server.request('GET', `/v1/instances/${id}`, { key });
    if (status === 'gone' && reply.status === 404) return {};
    last = reply.status === 200 ? reply.body.data.status : `HTTP ${reply.status}`;
    if (last === status) return reply.body.data;
    await new Promise((resolve) => setTimeout(resolve, 15));
  }
  throw new Error(`instance ${id} did not become ${status} within ${timeoutMs} ms (last: ${last})`);
}
