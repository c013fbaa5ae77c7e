/**
 * Idempotency-Key across a crash, on both stores: the real server as a child process dies (SIGKILL)
 * after a create committed and before its answer was saved or sent; a new process on the same data dir
 * and database gets the retry with the same key, and answers it as a replay of what the first made —
 * the same status, `Idempotent-Replayed: true`, the one resource that exists — instead of
 * `409 idempotency_key_in_use` for the claim's lease and then a second create (issue 29 item 2).
 *
 * The crash point is the test-only NIMBUS_TEST_CRASH_AFTER_COMMIT: a process started with it kills
 * itself when a request that claimed a key is about to save its answer, which is after the request's
 * transaction committed. Requests without the header (the set-up here) are not affected, and neither is
 * a replay (it claims nothing), so the restarted process runs with the same setting.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from './helpers/backends.js';
import { restartableServer } from './helpers/child-server.js';
import { waitFor } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';
import type { Reply } from './helpers/server.js';

type Json = Record<string, any>;

const REGION = COMPUTE.region;
const SSH_PUBLIC_KEY =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRb9olYCpSGsNwvNt3+sWeG618K2x4QXKOmIIiBqnY7 fixed@vector';
/** Nothing listens there: deliveries fail at once, which is all the set-up needs. */
const DEAD_RECEIVER = 'https://127.0.0.1:9/hook';
const WAIT = { timeoutMs: 30_000, intervalMs: 50 };

describe.concurrent.each(STORES)('Idempotency-Key: kill -9 after a create committed (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-idempotency-durability-' });
  const server = restartableServer(suite, {
    env: {
      NIMBUS_TEST_CRASH_AFTER_COMMIT: '1',
      NIMBUS_SIM_SPEEDUP: '100',
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
    },
    // The host is shared: a start can take long while other suites run.
    startTimeoutMs: 90_000,
  });
  const { live } = server;
  let root = '';
  /** Made without keys before the crashes: what some creates need (a source, a parent). */
  const setup = { volume: '', snapshot: '', vpn: '', webhook: '', delivery: '', accountWriter: '' };

  async function read(path: string, key = root): Promise<Json> {
    const reply = await live().request('GET', path, { key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body;
  }

  async function made(path: string, body: Json, status: number): Promise<Json> {
    const reply = await live().request('POST', path, { key: root, body });
    expect(reply.status, reply.text).toBe(status);
    return reply.body.data;
  }

  async function waitForStatus(path: string, status: string): Promise<void> {
    const reached = async () => ((await read(path)).data.status === status ? true : undefined);
    await waitFor(`${path} to be ${status}`, reached, WAIT);
  }

  let keys = 0;

  /**
   * POST with a new Idempotency-Key to a process that dies after committing it; a new process; the same
   * request again, which must be a replay with `status`. Returns the replay and its key.
   */
  async function crashThenRetry(path: string, body: Json | undefined, status: number) {
    keys += 1;
    const options = {
      key: root,
      ...(body === undefined ? {} : { body }),
      headers: { 'idempotency-key': `crash-${store}-${keys}` },
    };
    await expect(live().request('POST', path, options)).rejects.toThrow();
    await server.kill();
    await server.start();
    const retry = await live().request('POST', path, options);
    expect(retry.status, retry.text).toBe(status);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    return { retry, options };
  }

  /** The replay names the one resource `list` finds, and a second retry names it again. */
  async function expectOne(
    retry: Reply,
    options: Json,
    path: string,
    list: string,
    idOf: (data: Json) => string,
    matches: (item: Json) => boolean,
  ): Promise<string> {
    const id = idOf(retry.body.data);
    expect(id).toEqual(expect.any(String));
    const found = ((await read(list)).data as Json[]).filter(matches);
    expect(found.map((item) => item.id)).toEqual([id]);
    const again = await live().request('POST', path, options);
    expect(again.status).toBe(retry.status);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(idOf(again.body.data)).toBe(id);
    return id;
  }

  /** The common case: a create whose answer's `data.id` is the resource, listed at `list`. */
  async function createOnce(
    path: string,
    body: Json | undefined,
    status: number,
    list: string,
    matches: (item: Json) => boolean,
  ) {
    const { retry, options } = await crashThenRetry(path, body, status);
    return expectOne(retry, options, path, list, (data) => data.id, matches);
  }

  beforeAll(async () => {
    await server.start();
    root = live().rootKey;
    setup.volume = (await made('/v1/volumes', { name: 'source', size_gb: 10, region: REGION }, 202)).id;
    setup.vpn = (await made('/v1/vpn', { name: 'parent', region: REGION }, 202)).id;
    setup.webhook = (await made('/v1/webhooks', { url: DEAD_RECEIVER, events: ['ssh_key.deleted'] }, 201)).id;
    setup.accountWriter = (
      await made('/v1/account/api-keys', { name: 'account-writer', permissions: ['account:write'] }, 201)
    ).key;
    await waitForStatus(`/v1/volumes/${setup.volume}`, 'available');
    setup.snapshot = (await made('/v1/snapshots', { name: 'source-copy', volume_id: setup.volume }, 202)).id;
    await waitForStatus(`/v1/snapshots/${setup.snapshot}`, 'available');
    const test = await live().request('POST', `/v1/webhooks/${setup.webhook}/test`, { key: root });
    expect(test.status, test.text).toBe(200);
    setup.delivery = test.body.data.id;
  }, 120_000);

  it.sequential('an instance: one exists, is counted once in the quota and billed once', async () => {
    const id = await createOnce(
      '/v1/instances',
      { name: 'once-instance', ...COMPUTE },
      202,
      '/v1/instances?limit=100',
      (item) => item.name === 'once-instance',
    );
    const quotas = (await read('/v1/account/quota')).data as Json[];
    expect(quotas.find((quota) => quota.name === 'instances')).toMatchObject({ used: 1 });
    await waitForStatus(`/v1/instances/${id}`, 'running');
    // Metered from the create on: the usage names the instances billed.
    const billed = await waitFor(
      'the instance to be metered',
      async () => {
        const usage = (await read('/v1/billing/usage?group_by=resource&limit=1000')).data;
        const lines = (usage.line_items as Json[]).filter((line) => line.resource_type === 'instance');
        return lines.length > 0 ? lines : undefined;
      },
      WAIT,
    );
    expect([...new Set(billed.map((line) => line.resource_id))]).toEqual([id]);
  }, 120_000);

  it.sequential('a volume', async () => {
    await createOnce(
      '/v1/volumes',
      { name: 'once-volume', size_gb: 10, region: REGION },
      202,
      '/v1/volumes?limit=100',
      (item) => item.name === 'once-volume',
    );
  }, 120_000);

  it.sequential('a snapshot', async () => {
    await createOnce(
      '/v1/snapshots',
      { name: 'once-snapshot', volume_id: setup.volume },
      202,
      '/v1/snapshots?limit=100',
      (item) => item.name === 'once-snapshot',
    );
  }, 120_000);

  it.sequential('a volume restored from a snapshot', async () => {
    const path = `/v1/snapshots/${setup.snapshot}/restore`;
    const { retry, options } = await crashThenRetry(path, { name: 'once-restored' }, 202);
    expect(retry.body.data.snapshot.id).toBe(setup.snapshot);
    await expectOne(
      retry,
      options,
      path,
      '/v1/volumes?limit=100',
      (data) => data.volume.id,
      (item) => item.name === 'once-restored',
    );
  }, 120_000);

  it.sequential('an API key (without its value), replayed only to a key that could make it', async () => {
    const path = '/v1/account/api-keys';
    const { retry, options } = await crashThenRetry(
      path,
      { name: 'once-key', permissions: ['instances:read'] },
      201,
    );
    expect(retry.body.data).not.toHaveProperty('key');
    expect(retry.body.data.permissions).toEqual(['instances:read']);
    await expectOne(
      retry,
      options,
      path,
      '/v1/account/api-keys?limit=100',
      (data) => data.id,
      (item) => {
        return item.name === 'once-key';
      },
    );
    // An account:write key does not hold instances:read: a fresh request for that key is a 403, and so
    // is the replay of another key's.
    const refused = await live().request('POST', path, { ...options, key: setup.accountWriter });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.headers['idempotent-replayed']).toBeUndefined();
    expect(refused.body.error).toMatchObject({
      code: 'forbidden',
      details: { permissions: ['instances:read'] },
    });
  }, 120_000);

  it.sequential('an SSH key', async () => {
    await createOnce(
      '/v1/ssh-keys',
      { name: 'once-ssh', public_key: SSH_PUBLIC_KEY },
      201,
      '/v1/ssh-keys?limit=100',
      (item) => item.name === 'once-ssh',
    );
  }, 120_000);

  it.sequential('a firewall rule', async () => {
    await createOnce(
      '/v1/firewall/rules',
      {
        name: 'once-rule',
        direction: 'inbound',
        action: 'allow',
        protocol: 'tcp',
        ports: '22',
        sources: ['198.51.100.0/24'],
        region: REGION,
      },
      201,
      '/v1/firewall/rules?limit=100',
      (item) => item.name === 'once-rule',
    );
  }, 120_000);

  it.sequential('a webhook (without its secret)', async () => {
    const path = '/v1/webhooks';
    const { retry, options } = await crashThenRetry(
      path,
      { url: `${DEAD_RECEIVER}/once`, events: ['ssh_key.deleted'], description: 'once-webhook' },
      201,
    );
    expect(retry.body.data).not.toHaveProperty('secret');
    await expectOne(
      retry,
      options,
      path,
      '/v1/webhooks?limit=100',
      (data) => data.id,
      (item) => {
        return item.description === 'once-webhook';
      },
    );
  }, 120_000);

  it.sequential('a redelivery', async () => {
    await createOnce(
      `/v1/webhooks/${setup.webhook}/deliveries/${setup.delivery}/redeliver`,
      undefined,
      202,
      `/v1/webhooks/${setup.webhook}/deliveries?limit=100`,
      (item) => item.redelivery_of === setup.delivery,
    );
  }, 120_000);

  it.sequential('a VPN', async () => {
    await createOnce(
      '/v1/vpn',
      { name: 'once-vpn', region: REGION },
      202,
      '/v1/vpn?limit=100',
      (item) => item.name === 'once-vpn',
    );
  }, 120_000);

  it.sequential('a VPN peer (without its private key)', async () => {
    const path = `/v1/vpn/${setup.vpn}/peers`;
    const { retry, options } = await crashThenRetry(path, { name: 'once-peer' }, 201);
    expect(retry.body.data).not.toHaveProperty('private_key');
    await expectOne(
      retry,
      options,
      path,
      `/v1/vpn/${setup.vpn}/peers?limit=100`,
      (data) => data.id,
      (item) => {
        return item.name === 'once-peer';
      },
    );
  }, 120_000);

  it.sequential('an alert policy', async () => {
    await createOnce(
      '/v1/alerts',
      {
        name: 'once-alert',
        metric: 'cpu_percent',
        compare: 'above',
        threshold: 80,
        window: '5m',
        channels: { chat: [{ url: 'https://198.51.100.7/hooks/chat', format: 'slack' }] },
      },
      201,
      '/v1/alerts?limit=100',
      (item) => item.name === 'once-alert',
    );
  }, 120_000);
});
