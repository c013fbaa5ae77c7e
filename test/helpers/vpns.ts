/** Shared steps of the VPN suites: create one, wait for a status, add a peer, read events. */
import { expect } from 'vitest';
import { waitFor } from './common.js';
import type { TestServer } from './server.js';

type Json = Record<string, any>;

let counter = 0;

/** Creates a VPN (202) in us-east-1 and returns its record; `body` overrides the defaults. */
export async function createVpn(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  counter += 1;
  const reply = await server.request('POST', '/v1/vpn', {
    key,
    body: { name: `vpn-${counter}`, region: 'us-east-1', ...body },
  });
  expect(reply.status, reply.text).toBe(202);
  return reply.body.data;
}

/** Polls GET /v1/vpn/{id} until it has `status` (or, for 'gone', answers 404). */
export async function waitForVpn(server: TestServer, key: string, id: string, status: string): Promise<Json> {
  let last = '';
  return waitFor(
    `VPN ${id} to become ${status}`,
    async () => {
      const reply = await server.request('GET', `/v1/vpn/${id}`, { key });
      if (status === 'gone' && reply.status === 404) return {};
      last = reply.status === 200 ? reply.body.data.status : `HTTP ${reply.status}`;
      return last === status ? (reply.body.data as Json) : undefined;
    },
    { lastSeen: () => last },
  );
}

export async function createActiveVpn(server: TestServer, key: string, body: Json = {}): Promise<Json> {
  const created = await createVpn(server, key, body);
  return waitForVpn(server, key, created.id, 'active');
}

/** Adds a peer (201) and returns the answer's data; without `public_key` the server generates a pair. */
export async function addPeer(
  server: TestServer,
  key: string,
  vpnId: string,
  body: Json = {},
): Promise<Json> {
  counter += 1;
  const reply = await server.request('POST', `/v1/vpn/${vpnId}/peers`, {
    key,
    body: { name: `peer-${counter}`, ...body },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

/** The resource's events, oldest first. */
export async function vpnEvents(server: TestServer, key: string, id: string): Promise<Json[]> {
  const reply = await server.request('GET', `/v1/events?resource_id=${id}&limit=100`, { key });
  expect(reply.status, reply.text).toBe(200);
  return (reply.body.data as Json[]).reverse();
}
