/**
 * VPNs over HTTPS, on both stores: the lifecycle (provisioning → active, delete), the gateway's public
 * address (never an instance's), peers with their own key and with a generated key (checked by the real
 * `wg` and `wg-quick`), tunnel addresses without reuse while held, the gateway's own configuration as the
 * driver gets it, the validation table, quotas, events, lists and cross-account 404s.
 */
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../src/platform/secret-box.js';
import { gatewaySpecOf } from '../src/resources/vpns/kind.js';
import { findVpn } from '../src/resources/vpns/store.js';
import { configDigest, generateKeyPair, PRIVATE_KEY_PLACEHOLDER } from '../src/resources/vpns/wireguard.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid, waitFor } from './helpers/common.js';
import { createInstance } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';
import { addPeer, createActiveVpn, createVpn, vpnEvents, waitForVpn } from './helpers/vpns.js';
import { wgPubkey, wgQuickStrip } from './helpers/wireguard.js';

const FIELDS = [
  'allowed_cidrs',
  'created_at',
  'endpoint',
  'gateway_address',
  'id',
  'name',
  'port',
  'price_per_hour',
  'public_ip',
  'region',
  'routes',
  'server_public_key',
  'status',
  'tunnel_cidr',
  'updated_at',
];

describe.each(STORES)('VPNs (%s)', (store) => {
  // ap-northeast-1 gets a pool of five addresses, so the suite can see instances and gateways share it.
  const server = serverForSuite({ store, env: { NIMBUS_PUBLIC_IP_POOLS: 'ap-northeast-1=192.0.2.128/29' } });

  it('creates a VPN (202 provisioning) with every field, then it is active; vpn.created and vpn.active', async () => {
    const { key } = await account(server);
    const created = await createVpn(server, key, { name: 'office', allowed_cidrs: ['192.168.50.0/24'] });
    expect(Object.keys(created).sort()).toEqual(FIELDS);
    expect(created).toMatchObject({
      name: 'office',
      region: 'us-east-1',
      status: 'provisioning',
      port: 51820,
      tunnel_cidr: '100.96.0.0/24',
      gateway_address: '100.96.0.1',
      allowed_cidrs: ['192.168.50.0/24'],
      routes: ['10.10.0.0/16', '192.168.50.0/24'],
      price_per_hour: 0.05,
    });
    expect(created.id).toMatch(/^vpn_/);
    expect(created.endpoint).toBe(`${created.public_ip}:51820`);
    expect(created.public_ip).toMatch(/^203\.0\.113\.\d+$/);
    expect(Buffer.from(created.server_public_key, 'base64')).toHaveLength(32);
    const active = await waitForVpn(server, key, created.id, 'active');
    expect(active.endpoint).toBe(created.endpoint);
    const events = await vpnEvents(server, key, created.id);
    expect(events.map((e) => e.type)).toEqual(['vpn.created', 'vpn.active']);
    expect(events[0]?.data).toEqual({
      vpn_id: created.id,
      name: 'office',
      status: 'provisioning',
      region: 'us-east-1',
      endpoint: created.endpoint,
    });
    expect(events[1]?.data.status).toBe('active');
  });

  it("takes gateway addresses from the region's pool, never an instance's, until the pool is empty (503)", async () => {
    const { key } = await account(server);
    const region = { region: 'ap-northeast-1' };
    const a = await createInstance(server, key, region);
    const vpn1 = await createVpn(server, key, region);
    const b = await createInstance(server, key, region);
    const vpn2 = await createVpn(server, key, region);
    const c = await createInstance(server, key, region);
    const addresses = [a.public_ip, vpn1.public_ip, b.public_ip, vpn2.public_ip, c.public_ip];
    expect(new Set(addresses).size).toBe(5);
    expect(addresses.sort()).toEqual([
      '192.0.2.130',
      '192.0.2.131',
      '192.0.2.132',
      '192.0.2.133',
      '192.0.2.134',
    ]);
    const full = await server.request('POST', '/v1/vpn', { key, body: { name: 'none-left', ...region } });
    expect(expectError(full, 503, 'service_unavailable').details).toMatchObject({
      reason: 'insufficient_capacity',
      resource: 'public_ipv4',
    });
    expectError(
      await server.request('POST', '/v1/instances', {
        key,
        body: { name: 'x', instance_type: 'compute-1x', image: 'ubuntu-24.04', ...region },
      }),
      503,
      'service_unavailable',
    );
    // A deleted gateway gives its address back.
    expect((await server.request('DELETE', `/v1/vpn/${vpn1.id}`, { key })).status).toBe(202);
    await waitForVpn(server, key, vpn1.id, 'gone');
    const again = await createVpn(server, key, region);
    expect(again.public_ip).toBe(vpn1.public_ip);
  });

  it('adds a peer with its own public key: nothing secret in the answer; the config has a placeholder', async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key);
    const own = generateKeyPair();
    const peer = await addPeer(server, key, vpn.id, { name: 'laptop', public_key: own.publicKey });
    expect(peer).toMatchObject({
      vpn_id: vpn.id,
      name: 'laptop',
      public_key: own.publicKey,
      address: '100.96.0.2',
      key_generated: false,
    });
    expect(peer.id).toMatch(/^vpnp_/);
    expect(peer).not.toHaveProperty('private_key');
    expect(peer.config).toContain(`PrivateKey = ${PRIVATE_KEY_PLACEHOLDER}`);
    expect(peer.config).toContain(`PublicKey = ${vpn.server_public_key}`);
    expect(peer.config).toContain(`Endpoint = ${vpn.endpoint}`);
    expect(peer.config).toContain('AllowedIPs = 100.96.0.0/24, 10.10.0.0/16');
    expect(peer.config).toContain('Address = 100.96.0.2/32');
    expect(peer.config).toContain('DNS = 100.96.0.1');
    expect(peer.config).toContain('PersistentKeepalive = 25');
    // Filled in with the client's own key, wg-quick takes it.
    expect(wgQuickStrip(peer.config.replace(PRIVATE_KEY_PLACEHOLDER, own.privateKey))).toContain(
      `PrivateKey = ${own.privateKey}`,
    );
  });

  it("shows each peer's last handshake and bytes as the gateway counts them (the simulator's figures)", async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key);
    const added = await addPeer(server, key, vpn.id, { name: 'counted' });
    // A peer just added has no figures yet: the answer is its record and its file.
    expect(added).not.toHaveProperty('received_bytes');
    const read = async () => {
      const reply = await server.request('GET', `/v1/vpn/${vpn.id}/peers/${added.id}`, { key });
      expect(reply.status, reply.text).toBe(200);
      return reply.body.data as Record<string, any>;
    };
    const first = await waitFor('a handshake and bytes', async () => {
      const peer = await read();
      return peer.last_handshake_at !== null && peer.received_bytes > 0 ? peer : undefined;
    });
    expect(Date.parse(first.last_handshake_at)).toBeLessThanOrEqual(Date.now());
    expect(first.sent_bytes).toBeGreaterThan(0);
    // They go on counting, and the list shows the same figures as the peer.
    await waitFor('more bytes', async () =>
      (await read()).received_bytes > first.received_bytes ? true : undefined,
    );
    const list = await server.request('GET', `/v1/vpn/${vpn.id}/peers`, { key });
    expect(list.body.data[0]).toMatchObject({ id: added.id, last_handshake_at: expect.any(String) });
    expect(list.body.data[0].received_bytes).toBeGreaterThan(0);
  });

  it('adds a peer with a generated key: the private key once, in a wg-quick file wg accepts; never again', async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key);
    const options = { key, body: { name: 'phone' }, headers: { 'idempotency-key': `peer-${vpn.id}` } };
    const reply = await server.request('POST', `/v1/vpn/${vpn.id}/peers`, options);
    expect(reply.status, reply.text).toBe(201);
    expect(reply.headers['cache-control']).toBe('no-store');
    const peer = reply.body.data;
    expect(peer.key_generated).toBe(true);
    expect(wgPubkey(peer.private_key)).toBe(peer.public_key);
    expect(peer.config).toContain(`PrivateKey = ${peer.private_key}`);
    const stripped = wgQuickStrip(peer.config);
    expect(stripped).toContain(`PrivateKey = ${peer.private_key}`);
    expect(stripped).toContain(`Endpoint = ${vpn.endpoint}`);

    // The replay is the same peer without the secret; the config endpoint has the placeholder.
    const replay = await server.request('POST', `/v1/vpn/${vpn.id}/peers`, options);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data.id).toBe(peer.id);
    expect(replay.body.data).not.toHaveProperty('private_key');
    expect(replay.body.data).not.toHaveProperty('config');
    const config = await server.request('GET', `/v1/vpn/${vpn.id}/peers/${peer.id}/config`, { key });
    expect(config.status, config.text).toBe(200);
    expect(config.body.data).toMatchObject({ peer_id: peer.id, vpn_id: vpn.id, private_key_included: false });
    expect(config.body.data.config).not.toContain(peer.private_key);
    expect(config.body.data.config).toBe(peer.config.replace(peer.private_key, PRIVATE_KEY_PLACEHOLDER));
    const read = await server.request('GET', `/v1/vpn/${vpn.id}/peers/${peer.id}`, { key });
    expect(read.body.data).not.toHaveProperty('private_key');
    expect(
      JSON.stringify((await server.request('GET', `/v1/vpn/${vpn.id}/peers`, { key })).body),
    ).not.toContain(peer.private_key);
  });

  it('hands out tunnel addresses lowest first, never one held; a removed peer frees its address; a full tunnel is 409', async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key, { tunnel_cidr: '172.16.8.0/29' });
    expect(vpn.gateway_address).toBe('172.16.8.1');
    const peers = [];
    for (let i = 0; i < 5; i++) peers.push(await addPeer(server, key, vpn.id));
    expect(peers.map((p) => p.address)).toEqual([
      '172.16.8.2',
      '172.16.8.3',
      '172.16.8.4',
      '172.16.8.5',
      '172.16.8.6',
    ]);
    const full = await server.request('POST', `/v1/vpn/${vpn.id}/peers`, {
      key,
      body: { name: 'one-too-many' },
    });
    expect(expectError(full, 409, 'conflict').details).toMatchObject({
      tunnel_cidr: '172.16.8.0/29',
      peers: 5,
    });

    const removed = await server.request('DELETE', `/v1/vpn/${vpn.id}/peers/${peers[1]?.id}`, { key });
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body.data.address).toBe('172.16.8.3');
    expectError(
      await server.request('DELETE', `/v1/vpn/${vpn.id}/peers/${peers[1]?.id}`, { key }),
      404,
      'not_found',
    );
    const next = await addPeer(server, key, vpn.id);
    expect(next.address).toBe('172.16.8.3');
    const listed = await server.request(
      'GET',
      `/v1/vpn/${vpn.id}/peers?limit=100&sort=created_at&order=asc`,
      { key },
    );
    expect(listed.body.pagination.total_items).toBe(5);
    const held = listed.body.data.map((p: { address: string }) => p.address);
    expect(new Set(held).size).toBe(5);
  });

  it('refuses a public key twice on one VPN (409) and the gateway key (400); the same key on another VPN is fine', async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key);
    const { publicKey } = generateKeyPair();
    const first = await addPeer(server, key, vpn.id, { public_key: publicKey });
    const twice = await server.request('POST', `/v1/vpn/${vpn.id}/peers`, {
      key,
      body: { name: 'b', public_key: publicKey },
    });
    expect(expectError(twice, 409, 'conflict').details).toMatchObject({ peer_id: first.id });
    expectInvalid(
      await server.request('POST', `/v1/vpn/${vpn.id}/peers`, {
        key,
        body: { name: 'c', public_key: vpn.server_public_key },
      }),
      'public_key',
    );
    const other = await createVpn(server, key, { region: 'us-west-2' });
    expect((await addPeer(server, key, other.id, { public_key: publicKey })).address).toBe('100.96.0.2');
  });

  it("gives the driver the gateway's configuration: its sealed key, every peer, reloaded when peers change", async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key);
    const a = await addPeer(server, key, vpn.id);
    const b = await addPeer(server, key, vpn.id, { public_key: generateKeyPair().publicKey });
    const db = server.running.backends.store.db;
    const record = await findVpn(db, vpn.id);
    if (!record) throw new Error('the VPN is not in the store');
    // The private key is sealed at rest: the column is neither the key nor anything wg would take.
    expect(record.server_private_key_sealed).toMatch(/^v1:/);
    const spec = await gatewaySpecOf(
      db,
      SecretBox.open(server.config.dataDir, server.config.masterKey),
      record,
    );
    const privateKey = /PrivateKey = (\S+)/.exec(spec.config)?.[1] as string;
    expect(record.server_private_key_sealed).not.toContain(privateKey);
    expect(wgPubkey(privateKey)).toBe(vpn.server_public_key);
    const stripped = wgQuickStrip(spec.config);
    expect(stripped).toContain('ListenPort = 51820');
    expect(stripped).toContain(`PublicKey = ${a.public_key}\nAllowedIPs = 100.96.0.2/32`);
    expect(stripped).toContain(`PublicKey = ${b.public_key}\nAllowedIPs = 100.96.0.3/32`);
    // The running gateway has loaded exactly that configuration (the peer adds enqueued a reload).
    const gateway = await waitFor('the gateway to load both peers', async () => {
      const state = await server.running.backends.driver.inspectGateway(spec);
      return state.configDigest === configDigest(spec.config) ? state : undefined;
    });
    expect(gateway.state).toBe('active');
  });

  it('refuses bad names, regions, tunnel networks, routes and keys (400 naming the field)', async () => {
    const { key } = await account(server);
    const post = (body: Record<string, unknown>) =>
      server.request('POST', '/v1/vpn', { key, body: { name: 'v', region: 'us-east-1', ...body } });
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'has space' }, 'name'],
      [{ name: '' }, 'name'],
      [{ region: 'mars-1' }, 'region'],
      [{ tunnel_cidr: '100.96.0.0' }, 'tunnel_cidr'],
      [{ tunnel_cidr: '100.96.0.1/24' }, 'tunnel_cidr'],
      [{ tunnel_cidr: '100.96.0.0/30' }, 'tunnel_cidr'],
      [{ tunnel_cidr: '10.0.0.0/15' }, 'tunnel_cidr'],
      [{ tunnel_cidr: '8.8.8.0/24' }, 'tunnel_cidr'],
      [{ tunnel_cidr: '10.10.4.0/24' }, 'tunnel_cidr'],
      [{ tunnel_cidr: '010.96.0.0/24' }, 'tunnel_cidr'],
      [{ tunnel_cidr: '256.96.0.0/24' }, 'tunnel_cidr'],
      [{ allowed_cidrs: ['nope'] }, 'allowed_cidrs.0'],
      [{ allowed_cidrs: ['192.168.1.0/24', '192.168.1.1/24'] }, 'allowed_cidrs.1'],
      [{ allowed_cidrs: ['192.168.1.0/24', '192.168.1.0/24'] }, 'allowed_cidrs.1'],
      [{ allowed_cidrs: ['100.96.0.128/25'] }, 'allowed_cidrs.0'],
      [{ allowed_cidrs: Array.from({ length: 17 }, (_, i) => `192.168.${i}.0/24`) }, 'allowed_cidrs'],
      [{ endpoint: '1.2.3.4:51820' }, 'endpoint'],
    ];
    for (const [body, field] of cases) expectInvalid(await post(body), field);
    // A block that contains the whole tunnel (a full tunnel) is fine, as is a tunnel in us-east-1 that is
    // another region's private network.
    expect((await post({ allowed_cidrs: ['0.0.0.0/0'], tunnel_cidr: '10.20.0.0/24' })).status).toBe(202);

    const vpn = await createVpn(server, key);
    const peer = (body: Record<string, unknown>) =>
      server.request('POST', `/v1/vpn/${vpn.id}/peers`, { key, body: { name: 'p', ...body } });
    const { publicKey } = generateKeyPairSync('ed25519');
    for (const bad of [
      'short',
      `${generateKeyPair().publicKey}=`,
      Buffer.alloc(32).toString('base64'),
      publicKey.export({ format: 'pem', type: 'spki' }).toString(),
      generateKeyPair().publicKey.replace(/=$/, ''),
    ]) {
      expectInvalid(await peer({ public_key: bad }), 'public_key');
    }
    expectInvalid(await peer({ private_key: 'x' }), 'private_key');
    expectInvalid(await peer({ name: 'a/b' }), 'name');
    const patch = (body: Record<string, unknown>) =>
      server.request('PATCH', `/v1/vpn/${vpn.id}`, { key, body });
    expectInvalid(await patch({ tunnel_cidr: '100.97.0.0/24' }), 'tunnel_cidr');
    expectInvalid(await patch({ allowed_cidrs: ['100.96.0.0/26'] }), 'allowed_cidrs.0');
    expectError(await patch({}), 400, 'invalid_request');
  });

  it('PATCH changes name and routes (the config follows); a missing VPN or peer is 404', async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key);
    const peer = await addPeer(server, key, vpn.id);
    const patched = await server.request('PATCH', `/v1/vpn/${vpn.id}`, {
      key,
      body: { name: 'renamed', allowed_cidrs: ['192.168.7.0/24'] },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data).toMatchObject({
      name: 'renamed',
      routes: ['10.10.0.0/16', '192.168.7.0/24'],
      status: 'active',
    });
    const config = await server.request('GET', `/v1/vpn/${vpn.id}/peers/${peer.id}/config`, { key });
    expect(config.body.data.config).toContain('AllowedIPs = 100.96.0.0/24, 10.10.0.0/16, 192.168.7.0/24');
    const missing = await server.request('GET', '/v1/vpn/vpn_missing', { key });
    expect(expectError(missing, 404, 'not_found').details).toEqual({ resource: 'vpn', id: 'vpn_missing' });
    const noPeer = await server.request('GET', `/v1/vpn/${vpn.id}/peers/vpnp_missing/config`, { key });
    expect(expectError(noPeer, 404, 'not_found').details).toEqual({
      resource: 'vpn_peer',
      id: 'vpnp_missing',
    });
  });

  it('deletes a VPN (202 deleting, then 404) with its peers; peers cannot change meanwhile (409); vpn.* events in order', async () => {
    const { key } = await account(server);
    const vpn = await createActiveVpn(server, key);
    const peer = await addPeer(server, key, vpn.id);
    const removed = await addPeer(server, key, vpn.id);
    expect((await server.request('DELETE', `/v1/vpn/${vpn.id}/peers/${removed.id}`, { key })).status).toBe(
      200,
    );
    const reply = await server.request('DELETE', `/v1/vpn/${vpn.id}`, { key });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.body.data.status).toBe('deleting');
    // At speed-up 1000 the gateway takes 3 ms to go: the answers below see deleting or gone.
    for (const answer of [
      await server.request('POST', `/v1/vpn/${vpn.id}/peers`, { key, body: { name: 'late' } }),
      await server.request('DELETE', `/v1/vpn/${vpn.id}`, { key }),
    ]) {
      expect([404, 409]).toContain(answer.status);
    }
    await waitForVpn(server, key, vpn.id, 'gone');
    expectError(await server.request('GET', `/v1/vpn/${vpn.id}/peers`, { key }), 404, 'not_found');
    expectError(
      await server.request('GET', `/v1/vpn/${vpn.id}/peers/${peer.id}/config`, { key }),
      404,
      'not_found',
    );
    const events = await vpnEvents(server, key, vpn.id);
    expect(events.map((e) => e.type)).toEqual([
      'vpn.created',
      'vpn.active',
      'vpn.peer_added',
      'vpn.peer_added',
      'vpn.peer_removed',
      'vpn.deleted',
    ]);
    expect(events[2]?.data).toMatchObject({
      vpn_id: vpn.id,
      peer_id: peer.id,
      peer_name: peer.name,
      peer_address: '100.96.0.2',
      peer_public_key: peer.public_key,
    });
    expect(events[4]?.data).toMatchObject({ peer_id: removed.id, peer_address: '100.96.0.3' });
    expect(events[5]?.data.status).toBe('deleted');
  });

  it('refuses a VPN past the plan quota (403 quota_exceeded), counts it in the quota view, and a past-due account (402)', async () => {
    const free = await account(server, 'free');
    await createVpn(server, free.key);
    const over = await server.request('POST', '/v1/vpn', {
      key: free.key,
      body: { name: 'second', region: 'us-east-1' },
    });
    expect(expectError(over, 403, 'quota_exceeded').details).toEqual({
      quota: 'vpns',
      limit: 1,
      used: 1,
      requested: 1,
    });
    const quota = await server.request('GET', '/v1/account/quota', { key: free.key });
    expect(quota.body.data.find((q: { name: string }) => q.name === 'vpns')).toEqual({
      name: 'vpns',
      limit: 1,
      used: 1,
    });

    const late = await account(server);
    await server.admin('set-account-status', '--account', late.id, '--status', 'past_due');
    expectError(
      await server.request('POST', '/v1/vpn', { key: late.key, body: { name: 'v', region: 'us-east-1' } }),
      402,
      'payment_required',
    );
  });

  it('two concurrent creates at the last free slot: exactly one succeeds', async () => {
    const free = await account(server, 'free');
    const replies = await Promise.all(
      [1, 2, 3].map((n) =>
        server.request('POST', '/v1/vpn', {
          key: free.key,
          body: { name: `race-${n}`, region: 'eu-central-1' },
        }),
      ),
    );
    expect(replies.map((r) => r.status).sort()).toEqual([202, 403, 403]);
  });

  it('lists VPNs filtered by region and status, paged; unknown filter values are 400', async () => {
    const { key } = await account(server);
    const east = await createActiveVpn(server, key, { name: 'b-east' });
    const west = await createActiveVpn(server, key, { name: 'a-west', region: 'us-west-2' });
    const gone = await createActiveVpn(server, key, { name: 'c-gone', region: 'us-west-2' });
    expect((await server.request('DELETE', `/v1/vpn/${gone.id}`, { key })).status).toBe(202);
    await waitForVpn(server, key, gone.id, 'gone');
    const list = (query: string) => server.request('GET', `/v1/vpn${query}`, { key });
    const all = await list('');
    expect(all.body.data.map((v: { id: string }) => v.id)).toEqual([west.id, east.id]);
    expect(all.body.pagination).toMatchObject({ page: 1, total_items: 2, total_pages: 1 });
    expect((await list('?region=us-west-2')).body.data.map((v: { id: string }) => v.id)).toEqual([west.id]);
    expect(
      (await list('?status=active&region=us-east-1')).body.data.map((v: { id: string }) => v.id),
    ).toEqual([east.id]);
    expect((await list('?status=provisioning')).body.data).toEqual([]);
    expect(
      (await list('?sort=name&order=asc&limit=1&page=2')).body.data.map((v: { id: string }) => v.id),
    ).toEqual([east.id]);
    expect(expectError(await list('?status=up'), 400, 'invalid_request').details?.allowed_values).toEqual([
      'provisioning',
      'active',
      'deleting',
      'error',
    ]);
    expectInvalid(await list('?region=mars-1'), 'region');
  });

  it("answers 404 for another account's VPNs and peers, on every endpoint", async () => {
    const owner = await account(server);
    const stranger = await account(server);
    const vpn = await createActiveVpn(server, owner.key);
    const peer = await addPeer(server, owner.key, vpn.id);
    const calls: [string, string, unknown?][] = [
      ['GET', `/v1/vpn/${vpn.id}`],
      ['PATCH', `/v1/vpn/${vpn.id}`, { name: 'mine' }],
      ['DELETE', `/v1/vpn/${vpn.id}`],
      ['POST', `/v1/vpn/${vpn.id}/peers`, { name: 'intruder' }],
      ['GET', `/v1/vpn/${vpn.id}/peers`],
      ['GET', `/v1/vpn/${vpn.id}/peers/${peer.id}`],
      ['GET', `/v1/vpn/${vpn.id}/peers/${peer.id}/config`],
      ['DELETE', `/v1/vpn/${vpn.id}/peers/${peer.id}`],
    ];
    for (const [method, path, body] of calls) {
      const reply = await server.request(method, path, { key: stranger.key, ...(body ? { body } : {}) });
      expect(expectError(reply, 404, 'not_found').details, `${method} ${path}`).toEqual({
        resource: 'vpn',
        id: vpn.id,
      });
    }
    expect((await server.request('GET', '/v1/vpn', { key: stranger.key })).body.data).toEqual([]);
    // A peer id under another VPN of the owner is not found either.
    const other = await createVpn(server, owner.key, { region: 'us-west-2' });
    const crossed = await server.request('GET', `/v1/vpn/${other.id}/peers/${peer.id}`, { key: owner.key });
    expect(expectError(crossed, 404, 'not_found').details).toEqual({ resource: 'vpn_peer', id: peer.id });
    expect((await waitForVpn(server, owner.key, vpn.id, 'active')).name).not.toBe('mine');
  });
});
