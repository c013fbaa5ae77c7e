/** Shared steps of the volume suites: create one, act on it, wait for a status. */
import { expect } from 'vitest';
import { waitFor } from './common.js';
import type { Reply, TestServer } from './server.js';

type Json = Record<string, any>;

let counter = 0;

/** Creates a volume (202) in us-east-1 and returns its record; `body` overrides the defaults. */
export async function createVolume(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  counter += 1;
  const reply = await server.request('POST', '/v1/volumes', {
    key,
    body: { name: `vol-${counter}`, size_gb: 10, region: 'us-east-1', ...body },
  });
  expect(reply.status, reply.text).toBe(202);
  return reply.body.data;
}

/** Polls GET /v1/volumes/{id} until it has `status` (or, for 'gone', answers 404). */
export async function waitForVolume(
  server: TestServer,
  key: string,
  id: string,
  status: string,
): Promise<Json> {
  let last = '';
  return waitFor(
    `volume ${id} to become ${status}`,
    async () => {
      const reply = await server.request('GET', `/v1/volumes/${id}`, { key });
      if (status === 'gone' && reply.status === 404) return {};
      last = reply.status === 200 ? reply.body.data.status : `HTTP ${reply.status}`;
      return last === status ? (reply.body.data as Json) : undefined;
    },
    { lastSeen: () => last },
  );
}

export async function createAvailable(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  const created = await createVolume(server, key, body);
  return waitForVolume(server, key, created.id, 'available');
}

/** POST /v1/volumes/{id}/{action}. */
export function volumeAct(
  server: TestServer,
  key: string,
  id: string,
  action: string,
  body?: unknown,
): Promise<Reply> {
  return server.request('POST', `/v1/volumes/${id}/${action}`, {
    key,
    ...(body === undefined ? {} : { body }),
  });
}

/** Attaches (202) and waits for in-use. */
export async function attached(
  server: TestServer,
  key: string,
  id: string,
  instanceId: string,
): Promise<Json> {
  const reply = await volumeAct(server, key, id, 'attach', { instance_id: instanceId });
  expect(reply.status, reply.text).toBe(202);
  expect(reply.body.data.status).toBe('attaching');
  return waitForVolume(server, key, id, 'in-use');
}

export async function volumeEventTypes(server: TestServer, key: string, id: string): Promise<string[]> {
  const reply = await server.request('GET', `/v1/events?resource_id=${id}&limit=100`, { key });
  expect(reply.status, reply.text).toBe(200);
  return (reply.body.data as Json[]).map((e) => e.type).reverse();
}
