/** Shared steps of the snapshot suites: take one, wait for a status, restore. */
import { expect } from 'vitest';
import { waitFor } from './common.js';
import type { Reply, TestServer } from './server.js';

type Json = Record<string, any>;

let counter = 0;

/** POST /v1/snapshots (202) with a generated name; `body` names the source and overrides. */
export async function createSnapshot(server: TestServer, key: string, body: Json): Promise<Json> {
  counter += 1;
  const reply = await server.request('POST', '/v1/snapshots', {
    key,
    body: { name: `snap-${counter}`, ...body },
  });
  expect(reply.status, reply.text).toBe(202);
  return reply.body.data;
}

/** Polls GET /v1/snapshots/{id} until it has `status` (or, for 'gone', answers 404). */
export async function waitForSnapshot(
  server: TestServer,
  key: string,
  id: string,
  status: string,
): Promise<Json> {
  let last = '';
  return waitFor(
    `snapshot ${id} to become ${status}`,
    async () => {
      const reply = await server.request('GET', `/v1/snapshots/${id}`, { key });
      if (status === 'gone' && reply.status === 404) return {};
      last = reply.status === 200 ? reply.body.data.status : `HTTP ${reply.status}`;
      return last === status ? (reply.body.data as Json) : undefined;
    },
    { lastSeen: () => last },
  );
}

export async function availableSnapshot(server: TestServer, key: string, body: Json): Promise<Json> {
  const created = await createSnapshot(server, key, body);
  return waitForSnapshot(server, key, created.id, 'available');
}

export function restore(server: TestServer, key: string, id: string, body: unknown): Promise<Reply> {
  return server.request('POST', `/v1/snapshots/${id}/restore`, { key, body });
}
