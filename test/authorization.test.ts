/**
 * The authorization matrix (STYLE.md habit 8): every /v1 endpoint, driven by one table. For each row:
 * no key and a wrong key are 401 authentication_failed, a key without the needed permission is 403
 * forbidden, a key holding exactly that permission succeeds, and another account's resource is 404
 * (never 403). A further test reads the served OpenAPI document and fails when an endpoint exists that
 * the table does not cover, so a new endpoint is one new row here.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PermissionArea } from '../src/platform/domain/permissions.js';
import { formatSshPublicKey } from '../src/resources/ssh-keys/rules.js';
import { STORES } from './helpers/backends.js';
import { waitFor as poll } from './helpers/common.js';
import { createInstance, waitForStatus } from './helpers/instances.js';
import { serverForSuite, startTestServer, type TestServer } from './helpers/server.js';
import { waitForVolume } from './helpers/volumes.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
type Permission = `${PermissionArea}:${'read' | 'write'}`;

/**
 * Makes a resource of the account whose (all-permission) key is given; returns its id, or the values of
 * every placeholder of the path when it has more than `{id}` (a webhook's delivery).
 */
type ResourceFactory = (server: TestServer, key: string) => Promise<string | Record<string, string>>;

/** The path with its placeholders filled; a bare id fills `{id}`. */
function fill(path: string, ids: string | Record<string, string> | undefined): string {
  if (ids === undefined) return path;
  const values = typeof ids === 'string' ? { id: ids } : ids;
  return path.replace(/\{(\w+)\}/g, (_, name: string) => values[name] ?? `{${name}}`);
}

/** The id a not-found answer names: the first placeholder's (the outermost resource). */
const firstId = (ids: string | Record<string, string>) =>
  typeof ids === 'string' ? ids : (ids.id as string);

interface Endpoint {
  method: Method;
  /** As in the OpenAPI document; `{id}` is replaced by a resource made with `resource`. */
  path: string;
  /** null: any valid key will do (the catalogue). */
  permission: Permission | null;
  /** What the body asks for needs these too (a restore into a new volume: volumes:write). */
  alsoNeeds?: Permission[];
  /** Status of a successful call. */
  ok: number;
  body?: unknown;
  /** A body that names the resource's fixtures (an attach names its instance): made from the ids. */
  bodyFor?: (ids: Record<string, string>) => unknown;
  resource?: ResourceFactory;
  /** Where the resource's owner reads it back (default: GET on `path`). */
  readPath?: string;
  /** A query string the call needs (`?…`), sent after the filled path. */
  query?: string;
  /** Success is a file to download (CSV, PDF), not the JSON envelope. */
  download?: true;
}

const apiKey: ResourceFactory = async (server, key) => {
  const reply = await server.request('POST', '/v1/account/api-keys', {
    key,
    body: { name: `fixture-${randomBytes(3).toString('hex')}`, permissions: ['account:read'] },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.id as string;
};

/** An instance in the given status (created, then stopped if asked). */
const instanceIn =
  (status: 'starting' | 'running' | 'stopped'): ResourceFactory =>
  async (server, key) => {
    const { id } = await createInstance(server, key);
    if (status === 'starting') return id as string;
    await waitForStatus(server, key, id, 'running');
    if (status === 'stopped') {
      expect((await server.request('POST', `/v1/instances/${id}/stop`, { key })).status).toBe(202);
      await waitForStatus(server, key, id, 'stopped');
    }
    return id as string;
  };

const sshKey: ResourceFactory = async (server, key) => {
  const { publicKey } = generateKeyPairSync('ed25519');
  const reply = await server.request('POST', '/v1/ssh-keys', {
    key,
    body: { name: `fixture-${randomBytes(4).toString('hex')}`, public_key: formatSshPublicKey(publicKey) },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.id as string;
};

/** A webhook subscription to a local port nothing listens on: deliveries fail at once, locally. */
const webhook: ResourceFactory = async (server, key) => {
  const reply = await server.request('POST', '/v1/webhooks', {
    key,
    body: { url: 'https://127.0.0.1:1/matrix', events: ['webhook.test'] },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.id as string;
};

/** The account's invoice for the running month (its draft exists once the account lists its invoices). */
const invoice: ResourceFactory = async (server, key) => {
  const reply = await server.request('GET', '/v1/billing/invoices?status=draft', { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data[0].id as string;
};

/** An alert policy posting to a local port nothing listens on (its tests fail at once, locally). */
const alertPolicy: ResourceFactory = async (server, key) => {
  const reply = await server.request('POST', '/v1/alerts', {
    key,
    body: {
      name: `fixture-${randomBytes(3).toString('hex')}`,
      state: 'error',
      channels: { chat: [{ url: 'https://127.0.0.1:1/matrix', format: 'generic' }] },
    },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.id as string;
};

/** A subscription and one delivery of it (a test delivery). */
const delivery: ResourceFactory = async (server, key) => {
  const id = (await webhook(server, key)) as string;
  const tested = await server.request('POST', `/v1/webhooks/${id}/test`, { key });
  expect(tested.status, tested.text).toBe(200);
  return { id, delivery_id: tested.body.data.id as string };
};

/** The newest event of the account (creating an API key makes one). */
const event: ResourceFactory = async (server, key) => {
  await apiKey(server, key);
  const reply = await server.request('GET', '/v1/events?limit=1', { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data[0].id as string;
};

/** A data volume, available. */
const volume: ResourceFactory = async (server, key) => {
  const reply = await server.request('POST', '/v1/volumes', {
    key,
    body: { name: `fixture-${randomBytes(3).toString('hex')}`, size_gb: 10, region: 'us-east-1' },
  });
  expect(reply.status, reply.text).toBe(202);
  const id = reply.body.data.id as string;
  await waitForVolume(server, key, id, 'available');
  return id;
};

/** An available volume and an instance of the same region to attach it to. */
const volumeAndInstance: ResourceFactory = async (server, key) => {
  const { id: instanceId } = await createInstance(server, key);
  return { id: (await volume(server, key)) as string, instance_id: instanceId as string };
};

/** A volume attached to an instance (in-use). */
const attachedVolume: ResourceFactory = async (server, key) => {
  const { id, instance_id } = (await volumeAndInstance(server, key)) as Record<string, string>;
  const reply = await server.request('POST', `/v1/volumes/${id}/attach`, { key, body: { instance_id } });
  expect(reply.status, reply.text).toBe(202);
  await waitForVolume(server, key, id as string, 'in-use');
  return id as string;
};

/** An available snapshot of an available volume. */
const snapshot: ResourceFactory = async (server, key) => {
  const volumeId = (await volume(server, key)) as string;
  const reply = await server.request('POST', '/v1/snapshots', {
    key,
    body: { name: `fixture-${randomBytes(3).toString('hex')}`, volume_id: volumeId },
  });
  expect(reply.status, reply.text).toBe(202);
  const id = reply.body.data.id as string;
  await poll(`snapshot ${id} available`, async () => {
    const got = await server.request('GET', `/v1/snapshots/${id}`, { key });
    return got.body.data?.status === 'available' ? true : undefined;
  });
  return id;
};

/** A VPN, provisioning (peers and deletes need no more); in us-west-2, clear of the instances' pool. */
const vpn: ResourceFactory = async (server, key) => {
  const reply = await server.request('POST', '/v1/vpn', {
    key,
    body: { name: `fixture-${randomBytes(3).toString('hex')}`, region: 'us-west-2' },
  });
  expect(reply.status, reply.text).toBe(202);
  return reply.body.data.id as string;
};

/** A VPN and one peer of it (with a generated key). */
const vpnPeer: ResourceFactory = async (server, key) => {
  const id = (await vpn(server, key)) as string;
  const reply = await server.request('POST', `/v1/vpn/${id}/peers`, { key, body: { name: 'fixture' } });
  expect(reply.status, reply.text).toBe(201);
  return { id, peer_id: reply.body.data.id as string };
};

/** An inbound rule of the account: SSH from one /24. */
const firewallRule: ResourceFactory = async (server, key) => {
  const reply = await server.request('POST', '/v1/firewall/rules', {
    key,
    body: {
      name: `fixture-${randomBytes(3).toString('hex')}`,
      direction: 'inbound',
      action: 'allow',
      protocol: 'tcp',
      ports: '22',
      sources: ['198.51.100.0/24'],
      region: 'us-east-1',
    },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.id as string;
};

/** The body of a request on the endpoint, for the resource ids (or placeholders) it is sent with. */
/** An unassigned public IP. */
const publicIp: ResourceFactory = async (server, key) => {
  const reply = await server.request('POST', '/v1/public-ips', { key, body: { region: 'us-east-1' } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.id as string;
};

/** An unassigned public IP and an instance made without one. */
const publicIpAndInstance: ResourceFactory = async (server, key) => {
  const { id: instanceId } = await createInstance(server, key, { public_ip: false });
  return { id: (await publicIp(server, key)) as string, instance_id: instanceId as string };
};

/** A public IP assigned to an instance: the one the instance was made with. */
const assignedPublicIp: ResourceFactory = async (server, key) => {
  const { id: instanceId } = await createInstance(server, key);
  const reply = await server.request('GET', `/v1/public-ips?instance_id=${instanceId}`, { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data[0].id as string;
};

function bodyOf(endpoint: Endpoint, ids: string | Record<string, string> | undefined): { body?: unknown } {
  if (endpoint.bodyFor) {
    const values = typeof ids === 'string' ? { id: ids } : (ids ?? {});
    return { body: endpoint.bodyFor(values) };
  }
  return endpoint.body !== undefined ? { body: endpoint.body } : {};
}

const ENDPOINTS: Endpoint[] = [
  {
    method: 'POST',
    path: '/v1/vpn',
    permission: 'networking:write',
    ok: 202,
    body: { name: 'matrix', region: 'us-west-2' },
  },
  { method: 'GET', path: '/v1/vpn', permission: 'networking:read', ok: 200 },
  { method: 'GET', path: '/v1/vpn/{id}', permission: 'networking:read', ok: 200, resource: vpn },
  {
    method: 'PATCH',
    path: '/v1/vpn/{id}',
    permission: 'networking:write',
    ok: 200,
    body: { name: 'renamed' },
    resource: vpn,
  },
  { method: 'DELETE', path: '/v1/vpn/{id}', permission: 'networking:write', ok: 202, resource: vpn },
  {
    method: 'POST',
    path: '/v1/vpn/{id}/peers',
    permission: 'networking:write',
    ok: 201,
    body: { name: 'matrix' },
    resource: vpn,
    readPath: '/v1/vpn/{id}',
  },
  { method: 'GET', path: '/v1/vpn/{id}/peers', permission: 'networking:read', ok: 200, resource: vpn },
  {
    method: 'GET',
    path: '/v1/vpn/{id}/peers/{peer_id}',
    permission: 'networking:read',
    ok: 200,
    resource: vpnPeer,
  },
  {
    method: 'DELETE',
    path: '/v1/vpn/{id}/peers/{peer_id}',
    permission: 'networking:write',
    ok: 200,
    resource: vpnPeer,
  },
  {
    method: 'GET',
    path: '/v1/vpn/{id}/peers/{peer_id}/config',
    permission: 'networking:read',
    ok: 200,
    resource: vpnPeer,
  },
  { method: 'GET', path: '/v1/account', permission: 'account:read', ok: 200 },
  {
    method: 'PATCH',
    path: '/v1/account',
    permission: 'account:write',
    ok: 200,
    body: { company: 'Matrix Ltd' },
  },
  { method: 'GET', path: '/v1/account/quota', permission: 'account:read', ok: 200 },
  { method: 'GET', path: '/v1/account/rate-limit', permission: 'account:read', ok: 200 },
  {
    method: 'POST',
    path: '/v1/account/api-keys',
    permission: 'account:write',
    ok: 201,
    body: { name: 'matrix', permissions: ['account:read'] },
  },
  { method: 'GET', path: '/v1/account/api-keys', permission: 'account:read', ok: 200 },
  { method: 'GET', path: '/v1/account/api-keys/{id}', permission: 'account:read', ok: 200, resource: apiKey },
  {
    method: 'DELETE',
    path: '/v1/account/api-keys/{id}',
    permission: 'account:write',
    ok: 200,
    resource: apiKey,
  },
  { method: 'GET', path: '/v1/instance-types', permission: null, ok: 200 },
  { method: 'GET', path: '/v1/regions', permission: null, ok: 200 },
  { method: 'GET', path: '/v1/images', permission: null, ok: 200 },
  {
    method: 'POST',
    path: '/v1/instances',
    permission: 'instances:write',
    ok: 202,
    body: { name: 'matrix', instance_type: 'compute-1x', region: 'us-east-1', image: 'debian-12' },
  },
  { method: 'GET', path: '/v1/instances', permission: 'instances:read', ok: 200 },
  {
    method: 'GET',
    path: '/v1/instances/{id}',
    permission: 'instances:read',
    ok: 200,
    resource: instanceIn('starting'),
  },
  {
    method: 'PATCH',
    path: '/v1/instances/{id}',
    permission: 'instances:write',
    ok: 200,
    body: { name: 'renamed' },
    resource: instanceIn('starting'),
  },
  {
    method: 'DELETE',
    path: '/v1/instances/{id}',
    permission: 'instances:write',
    ok: 202,
    resource: instanceIn('starting'),
  },
  ...(['start', 'stop', 'restart', 'resize'] as const).map(
    (action): Endpoint => ({
      method: 'POST',
      path: `/v1/instances/{id}/${action}`,
      permission: 'instances:write',
      ok: 202,
      resource: instanceIn(action === 'start' ? 'stopped' : 'running'),
      readPath: '/v1/instances/{id}',
      ...(action === 'resize' ? { body: { instance_type: 'compute-2x' } } : {}),
    }),
  ),
  {
    method: 'GET',
    path: '/v1/instances/{id}/network',
    permission: 'networking:read',
    ok: 200,
    resource: instanceIn('starting'),
  },
  {
    method: 'GET',
    path: '/v1/instances/{id}/metrics',
    permission: 'monitoring:read',
    ok: 200,
    resource: instanceIn('starting'),
  },
  // The streams' WebSocket side (close codes 4401/4403/4404) is covered in metrics-streams.test.ts; a
  // plain GET goes through the guard like any read.
  {
    method: 'GET',
    path: '/v1/instances/{id}/metrics/stream',
    permission: 'monitoring:read',
    ok: 200,
    resource: instanceIn('starting'),
  },
  { method: 'GET', path: '/v1/metrics/stream', permission: 'monitoring:read', ok: 200 },
  {
    method: 'POST',
    path: '/v1/alerts',
    permission: 'monitoring:write',
    ok: 201,
    body: {
      name: 'matrix',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 90,
      window: '5m',
      channels: { chat: [{ url: 'https://127.0.0.1:1/matrix', format: 'slack' }] },
    },
  },
  { method: 'GET', path: '/v1/alerts', permission: 'monitoring:read', ok: 200 },
  { method: 'GET', path: '/v1/alerts/incidents', permission: 'monitoring:read', ok: 200 },
  { method: 'GET', path: '/v1/alerts/{id}', permission: 'monitoring:read', ok: 200, resource: alertPolicy },
  {
    method: 'PATCH',
    path: '/v1/alerts/{id}',
    permission: 'monitoring:write',
    ok: 200,
    resource: alertPolicy,
    body: { name: 'renamed' },
  },
  {
    method: 'DELETE',
    path: '/v1/alerts/{id}',
    permission: 'monitoring:write',
    ok: 200,
    resource: alertPolicy,
  },
  {
    method: 'GET',
    path: '/v1/alerts/{id}/incidents',
    permission: 'monitoring:read',
    ok: 200,
    resource: alertPolicy,
  },
  {
    method: 'POST',
    path: '/v1/alerts/{id}/test',
    permission: 'monitoring:write',
    ok: 200,
    resource: alertPolicy,
    readPath: '/v1/alerts/{id}',
  },
  {
    method: 'GET',
    path: '/v1/instances/{id}/network/check',
    query: '?protocol=tcp&port=22&address=198.51.100.7',
    permission: 'networking:read',
    ok: 200,
    resource: instanceIn('starting'),
    readPath: '/v1/instances/{id}',
  },
  {
    method: 'POST',
    path: '/v1/firewall/rules',
    permission: 'networking:write',
    ok: 201,
    body: {
      name: 'matrix',
      direction: 'inbound',
      action: 'deny',
      protocol: 'all',
      sources: ['203.0.113.0/24'],
      region: 'us-east-1',
    },
  },
  { method: 'GET', path: '/v1/firewall/rules', permission: 'networking:read', ok: 200 },
  {
    method: 'GET',
    path: '/v1/firewall/rules/{id}',
    permission: 'networking:read',
    ok: 200,
    resource: firewallRule,
  },
  {
    method: 'PATCH',
    path: '/v1/firewall/rules/{id}',
    permission: 'networking:write',
    ok: 200,
    body: { priority: 5 },
    resource: firewallRule,
  },
  {
    method: 'DELETE',
    path: '/v1/firewall/rules/{id}',
    permission: 'networking:write',
    ok: 200,
    resource: firewallRule,
  },
  {
    method: 'POST',
    path: '/v1/public-ips',
    permission: 'networking:write',
    ok: 201,
    body: { region: 'us-east-1' },
  },
  { method: 'GET', path: '/v1/public-ips', permission: 'networking:read', ok: 200 },
  { method: 'GET', path: '/v1/public-ips/{id}', permission: 'networking:read', ok: 200, resource: publicIp },
  {
    method: 'PATCH',
    path: '/v1/public-ips/{id}',
    permission: 'networking:write',
    ok: 200,
    body: { name: 'renamed' },
    resource: publicIp,
  },
  {
    method: 'DELETE',
    path: '/v1/public-ips/{id}',
    permission: 'networking:write',
    ok: 200,
    resource: publicIp,
  },
  {
    method: 'POST',
    path: '/v1/public-ips/{id}/assign',
    permission: 'networking:write',
    ok: 200,
    resource: publicIpAndInstance,
    bodyFor: (ids) => ({ instance_id: ids.instance_id ?? 'ins_00000000000000000000000000' }),
    readPath: '/v1/public-ips/{id}',
  },
  {
    method: 'POST',
    path: '/v1/public-ips/{id}/unassign',
    permission: 'networking:write',
    ok: 200,
    resource: assignedPublicIp,
    readPath: '/v1/public-ips/{id}',
  },
  {
    method: 'POST',
    path: '/v1/volumes',
    permission: 'volumes:write',
    ok: 202,
    body: { name: 'matrix', size_gb: 1, region: 'us-east-1' },
  },
  { method: 'GET', path: '/v1/volumes', permission: 'volumes:read', ok: 200 },
  { method: 'GET', path: '/v1/volumes/{id}', permission: 'volumes:read', ok: 200, resource: volume },
  {
    method: 'PATCH',
    path: '/v1/volumes/{id}',
    permission: 'volumes:write',
    ok: 200,
    body: { name: 'renamed' },
    resource: volume,
  },
  { method: 'DELETE', path: '/v1/volumes/{id}', permission: 'volumes:write', ok: 202, resource: volume },
  {
    method: 'POST',
    path: '/v1/volumes/{id}/attach',
    permission: 'volumes:write',
    ok: 202,
    resource: volumeAndInstance,
    bodyFor: (ids) => ({ instance_id: ids.instance_id ?? 'ins_00000000000000000000000000' }),
    readPath: '/v1/volumes/{id}',
  },
  {
    method: 'POST',
    path: '/v1/volumes/{id}/detach',
    permission: 'volumes:write',
    ok: 202,
    resource: attachedVolume,
    readPath: '/v1/volumes/{id}',
  },
  {
    method: 'POST',
    path: '/v1/volumes/{id}/resize',
    permission: 'volumes:write',
    ok: 202,
    body: { size_gb: 20 },
    resource: volume,
    readPath: '/v1/volumes/{id}',
  },
  {
    // The volume is the resource: another account's is a 404 naming `volume_id`.
    method: 'POST',
    path: '/v1/snapshots',
    permission: 'snapshots:write',
    ok: 202,
    resource: volume,
    bodyFor: (ids) => ({ name: 'matrix', volume_id: ids.id ?? 'vol_00000000000000000000000000' }),
    readPath: '/v1/volumes/{id}',
  },
  { method: 'GET', path: '/v1/snapshots', permission: 'snapshots:read', ok: 200 },
  { method: 'GET', path: '/v1/snapshots/{id}', permission: 'snapshots:read', ok: 200, resource: snapshot },
  {
    method: 'PATCH',
    path: '/v1/snapshots/{id}',
    permission: 'snapshots:write',
    ok: 200,
    body: { name: 'renamed' },
    resource: snapshot,
  },
  {
    method: 'DELETE',
    path: '/v1/snapshots/{id}',
    permission: 'snapshots:write',
    ok: 202,
    resource: snapshot,
  },
  {
    method: 'POST',
    path: '/v1/snapshots/{id}/restore',
    permission: 'snapshots:write',
    alsoNeeds: ['volumes:write'],
    ok: 202,
    body: { name: 'matrix-restored' },
    resource: snapshot,
    readPath: '/v1/snapshots/{id}',
  },
  {
    method: 'POST',
    path: '/v1/ssh-keys',
    permission: 'instances:write',
    ok: 201,
    body: {
      name: 'matrix',
      public_key: formatSshPublicKey(generateKeyPairSync('ed25519').publicKey),
    },
  },
  { method: 'GET', path: '/v1/ssh-keys', permission: 'instances:read', ok: 200 },
  { method: 'GET', path: '/v1/ssh-keys/{id}', permission: 'instances:read', ok: 200, resource: sshKey },
  { method: 'DELETE', path: '/v1/ssh-keys/{id}', permission: 'instances:write', ok: 200, resource: sshKey },
  { method: 'GET', path: '/v1/events', permission: 'account:read', ok: 200 },
  { method: 'GET', path: '/v1/events/{id}', permission: 'account:read', ok: 200, resource: event },
  { method: 'GET', path: '/v1/events/types', permission: 'account:read', ok: 200 },
  {
    method: 'POST',
    path: '/v1/webhooks',
    permission: 'webhooks:write',
    ok: 201,
    body: { url: 'https://127.0.0.1:1/matrix', events: ['instance.*'] },
  },
  { method: 'GET', path: '/v1/webhooks', permission: 'webhooks:read', ok: 200 },
  { method: 'GET', path: '/v1/webhooks/{id}', permission: 'webhooks:read', ok: 200, resource: webhook },
  {
    method: 'PATCH',
    path: '/v1/webhooks/{id}',
    permission: 'webhooks:write',
    ok: 200,
    body: { description: 'matrix' },
    resource: webhook,
  },
  { method: 'DELETE', path: '/v1/webhooks/{id}', permission: 'webhooks:write', ok: 200, resource: webhook },
  {
    method: 'POST',
    path: '/v1/webhooks/{id}/rotate-secret',
    permission: 'webhooks:write',
    ok: 200,
    resource: webhook,
    readPath: '/v1/webhooks/{id}',
  },
  {
    method: 'POST',
    path: '/v1/webhooks/{id}/test',
    permission: 'webhooks:write',
    ok: 200,
    resource: webhook,
    readPath: '/v1/webhooks/{id}',
  },
  {
    method: 'GET',
    path: '/v1/webhooks/{id}/deliveries',
    permission: 'webhooks:read',
    ok: 200,
    resource: webhook,
  },
  {
    method: 'GET',
    path: '/v1/webhooks/{id}/deliveries/{delivery_id}',
    permission: 'webhooks:read',
    ok: 200,
    resource: delivery,
  },
  {
    method: 'POST',
    path: '/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver',
    permission: 'webhooks:write',
    ok: 202,
    resource: delivery,
    readPath: '/v1/webhooks/{id}/deliveries/{delivery_id}',
  },
  { method: 'GET', path: '/v1/billing/usage', permission: 'billing:read', ok: 200 },
  { method: 'GET', path: '/v1/billing/usage.csv', permission: 'billing:read', ok: 200, download: true },
  { method: 'GET', path: '/v1/billing/invoices', permission: 'billing:read', ok: 200 },
  {
    method: 'GET',
    path: '/v1/billing/invoices/{id}',
    permission: 'billing:read',
    ok: 200,
    resource: invoice,
  },
  {
    method: 'GET',
    path: '/v1/billing/invoices/{id}.csv',
    permission: 'billing:read',
    ok: 200,
    resource: invoice,
    download: true,
  },
  {
    method: 'GET',
    path: '/v1/billing/invoices/{id}.pdf',
    permission: 'billing:read',
    ok: 200,
    resource: invoice,
    download: true,
  },
  {
    method: 'GET',
    path: '/v1/billing/estimate',
    query: '?instance_type=compute-1x',
    permission: 'billing:read',
    ok: 200,
  },
  {
    method: 'POST',
    path: '/v1/billing/estimate',
    permission: 'billing:read',
    ok: 200,
    body: { items: [{ instance_type: 'compute-1x', count: 2 }] },
  },
];

/** Permissions that do not grant `needed`: another area entirely, and for writes the same area's read. */
function lacking(needed: Permission): Permission[] {
  const [area, access] = needed.split(':') as [PermissionArea, string];
  const other: Permission = area === 'instances' ? 'volumes:write' : 'instances:write';
  return access === 'write' ? [other, `${area}:read`] : [other];
}

const label = (e: Endpoint) => `${e.method} ${e.path}`;

async function mintKey(server: TestServer, key: string, permissions: string[]): Promise<string> {
  const reply = await server.request('POST', '/v1/account/api-keys', {
    key,
    body: { name: `perm-${permissions.join('+')}`, permissions },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.key as string;
}

describe.each(STORES)('authorization matrix (%s)', (store) => {
  let server: TestServer;
  let owner: { id: string; key: string };
  let stranger: { id: string; key: string };
  const keysByPermissions = new Map<string, string>();

  /** A key of the owner's account holding exactly these permissions (made once, then reused). */
  async function ownerKey(permissions: string[]): Promise<string> {
    const id = permissions.join(',');
    let key = keysByPermissions.get(id);
    if (!key) {
      key = await mintKey(server, owner.key, permissions);
      keysByPermissions.set(id, key);
    }
    return key;
  }

  let anonymousCalls = 0;
  async function call(endpoint: Endpoint, key: string | null, headers: Record<string, string> = {}) {
    const ids = endpoint.resource ? await endpoint.resource(server, owner.key) : undefined;
    const path = fill(endpoint.path, ids) + (endpoint.query ?? '');
    // Callers without a valid key share a per-IP budget (burst 50); a client address of its own per
    // call keeps a long table from running into it.
    anonymousCalls += 1;
    const clientIp = `10.${(anonymousCalls >> 8) & 255}.${anonymousCalls & 255}.1`;
    return server.request(endpoint.method, path, {
      key,
      headers: { 'x-forwarded-for': clientIp, ...headers },
      ...bodyOf(endpoint, ids),
    });
  }

  beforeAll(async () => {
    server = await startTestServer({
      store,
      // Webhook fixtures point at a closed local port, so nothing leaves the machine.
      env: { NIMBUS_TRUST_PROXY: '127.0.0.1', NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1' },
    });
    // The table makes dozens of instances per account: room for them, and for the polling that waits on them.
    owner = await server.createAccount({ perHour: 100_000, burst: 5_000 });
    stranger = await server.createAccount({ perHour: 100_000, burst: 5_000 });
    for (const account of [owner, stranger]) {
      for (const [name, limit] of [
        ['instances', '1000'],
        ['vcpus', '10000'],
        ['webhooks', '1000'],
        ['alerts', '1000'],
        ['volumes', '1000'],
        ['volume_storage_gb', '100000'],
        ['vpns', '1000'],
        ['snapshots', '1000'],
        ['firewall_rules', '1000'],
        ['public_ips', '1000'],
      ] as const) {
        await server.admin('set-quota', '--account', account.id, '--name', name, '--limit', limit);
      }
    }
  });
  afterAll(async () => {
    await server?.close();
  });

  it('the table covers every authenticated endpoint the server serves', async () => {
    const reply = await server.request('GET', '/v1/openapi.json');
    expect(reply.status).toBe(200);
    const served: string[] = [];
    for (const [path, operations] of Object.entries(reply.body.paths as Record<string, object>)) {
      if (!path.startsWith('/v1/')) continue;
      for (const [method, operation] of Object.entries(
        operations as Record<string, { security?: unknown[] }>,
      )) {
        const isPublic = Array.isArray(operation.security) && operation.security.length === 0;
        if (!isPublic) served.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(served.length).toBeGreaterThanOrEqual(ENDPOINTS.length);
    expect(ENDPOINTS.map(label).sort()).toEqual(served.sort());
  });

  it.each(ENDPOINTS.map((e) => [label(e), e] as const))(
    '%s: no key → 401 authentication_failed',
    async (_, e) => {
      const reply = await call(e, null);
      expect(reply.status).toBe(401);
      expect(reply.body.error.code).toBe('authentication_failed');
      expect(reply.body.data).toBeUndefined();
      expect(reply.headers['x-ratelimit-limit']).toBeDefined();
    },
  );

  it.each(ENDPOINTS.map((e) => [label(e), e] as const))(
    '%s: wrong key → 401 authentication_failed',
    async (_, e) => {
      const wrong = `nmb_${randomBytes(32).toString('base64url').replace(/[-_]/g, 'x').slice(0, 43)}`;
      const bearer = await call(e, wrong);
      expect(bearer.status).toBe(401);
      expect(bearer.body.error.code).toBe('authentication_failed');
      const header = await call(e, null, { 'x-api-key': wrong });
      expect(header.status).toBe(401);
      expect(header.body.error.code).toBe('authentication_failed');
    },
  );

  it.each(ENDPOINTS.map((e) => [label(e), e] as const))(
    '%s: key without the permission → 403 forbidden; with exactly it → success',
    async (_, e) => {
      if (e.permission) {
        // Each lacking permission alone, and all of them together.
        const lackingSets = [...lacking(e.permission).map((p) => [p]), lacking(e.permission)];
        for (const permissions of lackingSets) {
          const reply = await call(e, await ownerKey(permissions));
          expect(reply.status, `${permissions} ${reply.text}`).toBe(403);
          expect(reply.body.error.code).toBe('forbidden');
          expect(reply.body.error.message).toContain(e.permission);
        }
      }
      // The positive control: the least a key may hold and still be let in.
      const sufficient = await ownerKey([e.permission ?? 'instances:read', ...(e.alsoNeeds ?? [])]);
      const reply = await call(e, sufficient);
      expect(reply.status, reply.text).toBe(e.ok);
      if (e.download) expect(reply.headers['content-disposition']).toMatch(/^attachment; filename="/);
      else expect(reply.body.success).toBe(true);
    },
  );

  it.each(ENDPOINTS.filter((e) => e.resource).map((e) => [label(e), e] as const))(
    "%s: another account's resource → 404 not_found, never 403",
    async (_, e) => {
      const theirs = await e.resource!(server, stranger.key);
      const path = fill(e.path, theirs) + (e.query ?? '');
      // Even with every permission, the owner cannot see or touch the stranger's resource.
      for (const key of [
        owner.key,
        await ownerKey([e.permission ?? 'instances:read', ...(e.alsoNeeds ?? [])]),
      ]) {
        const reply = await server.request(e.method, path, {
          key,
          ...bodyOf(e, theirs),
        });
        expect(reply.status, reply.text).toBe(404);
        expect(reply.body.error.code).toBe('not_found');
        // Which kind of resource, by a stable name, and the id asked for (and the body field that named
        // it, when a body did): nothing about its owner.
        const details = reply.body.error.details;
        expect(details).toEqual({
          resource: expect.stringMatching(
            /^(api_key|instance|ssh_key|event|webhook|volume|snapshot|vpn|firewall_rule|invoice|alert|public_ip)$/,
          ),
          id: firstId(theirs),
          ...(details?.field !== undefined ? { field: expect.any(String) } : {}),
        });
      }
      // The resource is untouched: its owner still sees it.
      const readBack = fill(e.readPath ?? e.path, theirs);
      const still = await server.request('GET', readBack, { key: stranger.key });
      expect(still.status, readBack).toBe(200);
      // A made-up id is the same 404 as someone else's, so ids cannot be probed.
      const missing = await server.request(
        e.method,
        e.path.replace(/\{\w+\}/g, 'key_00000000000000000000000000') + (e.query ?? ''),
        { key: owner.key, ...bodyOf(e, undefined) },
      );
      expect(missing.status).toBe(404);
      expect(missing.body.error.code).toBe('not_found');
    },
  );

  it("lists never include another account's resources", async () => {
    const theirs = await apiKey(server, stranger.key);
    const mine = await server.request('GET', '/v1/account/api-keys?limit=100', { key: owner.key });
    expect(mine.status).toBe(200);
    const ids = mine.body.data.map((k: { id: string }) => k.id);
    expect(ids).not.toContain(theirs);
    expect(ids.length).toBeGreaterThan(0);
  });
});

describe.each(STORES)('account status and access (%s)', (store) => {
  // The admin command runs beside the server, not inside it: read every key afresh.
  const server = serverForSuite({ store, env: { NIMBUS_AUTH_CACHE_SECONDS: '0' } });

  it('a suspended account gets 403 forbidden on every endpoint, and works again when reactivated', async () => {
    const account = await server.createAccount();
    expect((await server.request('GET', '/v1/account', { key: account.key })).status).toBe(200);

    const set = await server.admin('set-account-status', '--account', account.id, '--status', 'suspended');
    expect(set).toEqual({ account_id: account.id, status: 'suspended' });
    for (const e of ENDPOINTS) {
      const path = e.path.replace(/\{\w+\}/g, 'key_00000000000000000000000000');
      const reply = await server.request(e.method, path, {
        key: account.key,
        ...bodyOf(e, undefined),
      });
      expect(reply.status, `${label(e)} ${reply.text}`).toBe(403);
      expect(reply.body.error.code).toBe('forbidden');
      expect(reply.body.error.message).toMatch(/suspended/);
    }
    // Other accounts are unaffected.
    expect((await server.request('GET', '/v1/account', { key: server.rootKey })).status).toBe(200);

    await server.admin('set-account-status', '--account', account.id, '--status', 'active');
    const back = await server.request('GET', '/v1/account', { key: account.key });
    expect(back.status).toBe(200);
    expect(back.body.data.status).toBe('active');
  });

  it('a past_due account still reads (and deletes)', async () => {
    const account = await server.createAccount();
    const extra = await apiKey(server, account.key);
    await server.admin('set-account-status', '--account', account.id, '--status', 'past_due');
    const me = await server.request('GET', '/v1/account', { key: account.key });
    expect(me.status).toBe(200);
    expect(me.body.data.status).toBe('past_due');
    for (const path of [
      '/v1/account/quota',
      '/v1/account/rate-limit',
      '/v1/account/api-keys',
      '/v1/regions',
    ]) {
      expect((await server.request('GET', path, { key: account.key })).status, path).toBe(200);
    }
    const removed = await server.request('DELETE', `/v1/account/api-keys/${extra}`, { key: account.key });
    expect(removed.status).toBe(200);
  });
});
