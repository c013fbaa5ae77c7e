/**
 * The SDK (sdk/) against the real HTTPS server: typed errors, retries of real 429 and 503 answers, one
 * Idempotency-Key across a create's attempts, pagination past 100 items, waiting for instances. The
 * server's certificate is self-signed, so every client trusts it through `ca`, as a user would.
 *
 * The store does not change what the SDK sees, so one SQLite server serves the file. Its key cache is
 * off (NIMBUS_AUTH_CACHE_SECONDS=0) so that a rate limit changed by the operator in the middle of a
 * retried request applies to the very next attempt, and us-east-1 has no GPUs so that a GPU create
 * answers a real 503.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CertificateMismatchError,
  type components,
  Nimbus,
  NimbusApiError,
  NotFoundError,
  RateLimitError,
  ResourceFailedError,
  type RetryInfo,
  type RetryOptions,
  retryDelay,
  retryPolicy,
  ServiceUnavailableError,
} from '../sdk/src/index.js';
import { account } from './helpers/common.js';
import { serverForSuite } from './helpers/server.js';

const INSTANCE = { instance_type: 'compute-2x', region: 'us-east-1', image: 'ubuntu-24.04' } as const;

describe('SDK', () => {
  const server = serverForSuite({
    env: { NIMBUS_AUTH_CACHE_SECONDS: '0', NIMBUS_GPU_CAPACITY: 'us-west-2=8' },
  });
  const clients: Nimbus[] = [];

  function client(apiKey: string, retry?: RetryOptions): Nimbus {
    const made = new Nimbus({
      apiKey,
      baseUrl: server.url,
      ca: readFileSync(server.running.certFile),
      ...(retry ? { retry } : {}),
    });
    clients.push(made);
    return made;
  }

  afterEach(async () => {
    vi.unstubAllEnvs();
    await Promise.all(clients.splice(0).map((made) => made.close()));
  });

  /** The retries a client made, as onRetry saw them. */
  function recorder(): { retries: RetryInfo[]; onRetry: (retry: RetryInfo) => void } {
    const retries: RetryInfo[] = [];
    return { retries, onRetry: (retry) => void retries.push(retry) };
  }

  it('checks paths, bodies and answers against openapi/v1.json when it compiles', () => {
    // Never called: tsc (npm run typecheck) fails if any of these lines stops being an error.
    const misuse = async (nimbus: Nimbus) => {
      await nimbus.post('/v1/instances', {
        body: {
          name: 'web-1',
          // @ts-expect-error instance_typ is not a field of the create body (instance_type is)
          instance_typ: 'compute-2x',
          region: 'us-east-1',
          image: 'ubuntu-24.04',
        },
      });
      // @ts-expect-error no such path
      await nimbus.get('/v1/instancez');
      const { data } = await nimbus.get('/v1/instances/{id}', { params: { path: { id: 'ins_1' } } });
      // @ts-expect-error an instance has no field stauts
      return data.stauts;
    };
    expect(typeof misuse).toBe('function');
  });

  it('reads NIMBUS_API_KEY, NIMBUS_URL and NIMBUS_CA_FILE when not given them', async () => {
    const { key } = await account(server);
    vi.stubEnv('NIMBUS_API_KEY', key);
    vi.stubEnv('NIMBUS_URL', server.url);
    vi.stubEnv('NIMBUS_CA_FILE', server.running.certFile);
    const nimbus = new Nimbus();
    clients.push(nimbus);
    const { data } = await nimbus.get('/v1/account');
    expect(data.id).toMatch(/^acct_/);

    vi.stubEnv('NIMBUS_API_KEY', '');
    expect(() => new Nimbus({ baseUrl: server.url })).toThrow(/NIMBUS_API_KEY/);
  });

  it('throws a NotFoundError carrying the envelope: code, status, request id, details', async () => {
    const nimbus = client((await account(server)).key);
    const failure = await nimbus
      .get('/v1/instances/{id}', { params: { path: { id: 'ins_doesnotexist' } } })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(NotFoundError);
    expect(failure).toBeInstanceOf(NimbusApiError);
    const error = failure as NotFoundError;
    expect(error.status).toBe(404);
    expect(error.code).toBe('not_found');
    expect(error.requestId).toMatch(/^req_/);
    expect(error.details).toEqual({ resource: 'instance', id: 'ins_doesnotexist' });
    expect(error.message).toContain(error.requestId);
  });

  it('retries a 429 with delays doubling from its base until the limit lets it through, with one key and one instance', async () => {
    // 36 requests an hour with a burst of 1: once the one token is spent, the next is 100 s away.
    const { id: accountId, key } = await server.createAccount({ perHour: 36, burst: 1 });
    expect((await server.request('GET', '/v1/account', { key })).status).toBe(200);
    const retries: RetryInfo[] = [];
    const nimbus = client(key, {
      baseDelayMs: 10,
      jitter: 0,
      honorRetryAfter: false,
      maxRetries: 6,
      onRetry: async (retry) => {
        retries.push(retry);
        // After the third refusal the operator lifts the limit; the fourth attempt passes.
        if (retry.retry === 3) {
          await server.admin(
            'set-rate-limit',
            '--account',
            accountId,
            '--per-hour',
            '1000000',
            '--burst',
            '1000',
          );
        }
      },
    });
    const { data: created } = await nimbus.post('/v1/instances', {
      body: { name: 'retried-1', ...INSTANCE },
    });

    expect(retries.map((retry) => retry.status)).toEqual([429, 429, 429]);
    expect(retries.map((retry) => retry.delayMs)).toEqual([10, 20, 40]);
    expect(retries.every((retry) => retry.retryAfter !== null && retry.retryAfter >= 1)).toBe(true);
    const keys = new Set(retries.map((retry) => retry.idempotencyKey));
    expect(keys.size).toBe(1);
    const [idempotencyKey] = [...keys];
    expect(idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);

    const { data: instances } = await nimbus.get('/v1/instances', {
      params: { query: { name: 'retried-1' } },
    });
    expect(instances.map((instance) => instance.id)).toEqual([created.id]);
    // The key the retries carried is the one the server saved with the create: the same request with
    // it replays that answer instead of making a second instance.
    const replay = await server.request('POST', '/v1/instances', {
      key,
      headers: { 'idempotency-key': idempotencyKey! },
      body: { name: 'retried-1', ...INSTANCE },
    });
    expect(replay.status).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data.id).toBe(created.id);
  });

  it('waits what Retry-After asks with the default policy: 1 s, where the backoff starts', async () => {
    // 3,600 an hour with a burst of 1: a token a second, so the server says Retry-After: 1.
    const { key } = await server.createAccount({ perHour: 3600, burst: 1 });
    expect((await server.request('GET', '/v1/account', { key })).status).toBe(200);
    const { retries, onRetry } = recorder();
    const nimbus = client(key, { onRetry });
    const started = Date.now();
    const { data } = await nimbus.get('/v1/account');
    expect(data.id).toMatch(/^acct_/);
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ status: 429, retryAfter: 1, idempotencyKey: null });
    // 1 s doubled never, plus at most 20 % jitter (never less than the 1 s).
    expect(retries[0]!.delayMs).toBeGreaterThanOrEqual(1000);
    expect(retries[0]!.delayMs).toBeLessThanOrEqual(1200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  });

  it('gives up at once with a RateLimitError when Retry-After is past the longest delay', async () => {
    const { key } = await server.createAccount({ perHour: 36, burst: 1 });
    expect((await server.request('GET', '/v1/account', { key })).status).toBe(200);
    const { retries, onRetry } = recorder();
    const failure = await client(key, { onRetry, maxDelayMs: 30_000 })
      .get('/v1/account')
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RateLimitError);
    const error = failure as RateLimitError;
    expect(error).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
    expect(error.retryAfter).toBeGreaterThan(30);
    expect(error.requestId).toMatch(/^req_/);
    expect(retries).toEqual([]);
  });

  it('retries a 503 with doubling delays and throws ServiceUnavailableError when they run out', async () => {
    const { key } = await account(server);
    const { retries, onRetry } = recorder();
    const nimbus = client(key, { baseDelayMs: 5, jitter: 0, maxRetries: 3, onRetry });
    const failure = await nimbus
      .post('/v1/instances', {
        body: { name: 'gpu-1', instance_type: 'gpu-1x', region: 'us-east-1', image: 'ubuntu-22.04-cuda' },
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ServiceUnavailableError);
    expect((failure as ServiceUnavailableError).details).toMatchObject({ reason: 'insufficient_capacity' });
    expect(retries.map((retry) => [retry.status, retry.delayMs])).toEqual([
      [503, 5],
      [503, 10],
      [503, 20],
    ]);
    expect(new Set(retries.map((retry) => retry.idempotencyKey)).size).toBe(1);
    const { data } = await nimbus.get('/v1/instances', { params: { query: { name: 'gpu-1' } } });
    expect(data).toEqual([]);
  });

  it('computes the default schedule: 1, 2, 4, 8 s, capped, jitter only upwards', () => {
    const policy = retryPolicy();
    const lowest = [1, 2, 3, 4, 5, 6].map((retry) => retryDelay(policy, retry, null, () => 0));
    expect(lowest).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000]);
    const highest = [1, 2, 3].map((retry) => retryDelay(policy, retry, null, () => 1));
    expect(highest).toEqual([1200, 2400, 4800]);
    expect(retryDelay(policy, 1, 5, () => 0)).toBe(5000);
    expect(retryDelay(policy, 1, 31, () => 0)).toBeNull();
  });

  it('iterates every item of a list across pages: 251 API keys in pages of 100', async () => {
    const { id: accountId, key } = await account(server);
    await server.admin('set-quota', '--account', accountId, '--name', 'api_keys', '--limit', '300');
    const nimbus = client(key);
    const made: string[] = [];
    for (let batch = 0; batch < 25; batch++) {
      const created = await Promise.all(
        Array.from({ length: 10 }, (_, index) =>
          nimbus.post('/v1/account/api-keys', {
            body: { name: `key-${batch * 10 + index}`, permissions: ['account:read'] },
          }),
        ),
      );
      made.push(...created.map(({ data }) => data.id));
    }
    const seen: components['schemas']['ApiKey'][] = [];
    for await (const apiKey of nimbus.paginate('/v1/account/api-keys', {
      params: { query: { sort: 'created_at', order: 'asc' } },
    })) {
      seen.push(apiKey);
    }
    // The account's own key plus the 250 made here, each once.
    expect(seen).toHaveLength(251);
    expect(new Set(seen.map((apiKey) => apiKey.id)).size).toBe(251);
    expect(seen.map((apiKey) => apiKey.id)).toEqual(expect.arrayContaining(made));

    const firstTwo: string[] = [];
    for await (const apiKey of nimbus.paginate('/v1/account/api-keys', { params: { query: { limit: 2 } } })) {
      firstTwo.push(apiKey.id);
      if (firstTwo.length === 2) break;
    }
    expect(firstTwo).toHaveLength(2);
  }, 180_000);

  it('waits for an instance to be running, and for it to be gone', async () => {
    const nimbus = client((await account(server)).key);
    const { data: created } = await nimbus.post('/v1/instances', { body: { name: 'wait-1', ...INSTANCE } });
    expect(created.status).toBe('starting');
    const running = await nimbus.waitFor(created, 'running', { intervalMs: 20, timeoutMs: 15_000 });
    expect(running).toMatchObject({ id: created.id, status: 'running' });

    await nimbus.delete('/v1/instances/{id}', { params: { path: { id: created.id } } });
    await nimbus.waitFor(created, 'deleted', { intervalMs: 20, timeoutMs: 15_000 });
    await expect(
      nimbus.get('/v1/instances/{id}', { params: { path: { id: created.id } } }),
    ).rejects.toBeInstanceOf(NotFoundError);
  });

  it('fails fast when the instance ends in error instead of the status waited for', async () => {
    const nimbus = client((await account(server)).key);
    const { data: created } = await nimbus.post('/v1/instances', {
      body: { name: 'broken-1', ...INSTANCE, tags: { 'nimbus.sim/fault': 'boot-error' } },
    });
    const started = Date.now();
    const failure = await nimbus
      .waitFor(created, 'running', { intervalMs: 20, timeoutMs: 60_000 })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ResourceFailedError);
    expect(failure).toMatchObject({ resourceId: created.id, status: 'error', wanted: 'running' });
    // Well before the timeout: it stopped at the first read that said error.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('waits for a volume to be available, and fails fast on a snapshot that failed', async () => {
    const nimbus = client((await account(server)).key);
    const { data: volume } = await nimbus.post('/v1/volumes', {
      // The simulator fails every snapshot of a source with this tag.
      body: {
        name: 'data-1',
        size_gb: 10,
        region: 'us-east-1',
        tags: { 'nimbus.sim/fault': 'snapshot-fail' },
      },
    });
    const available = await nimbus.waitFor(volume, 'available', { intervalMs: 20, timeoutMs: 15_000 });
    expect(available).toMatchObject({ id: volume.id, status: 'available' });

    const { data: snapshot } = await nimbus.post('/v1/snapshots', {
      body: { name: 'doomed-1', volume_id: volume.id },
    });
    const failure = await nimbus
      .waitFor(snapshot, 'available', { intervalMs: 20, timeoutMs: 60_000 })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ResourceFailedError);
    expect(failure).toMatchObject({ resourceId: snapshot.id, status: 'failed' });
  });

  it('waits for a VPN gateway to be active', async () => {
    const nimbus = client((await account(server)).key);
    const { data: vpn } = await nimbus.post('/v1/vpn', { body: { name: 'office-1', region: 'us-east-1' } });
    const active = await nimbus.waitFor(vpn, 'active', { intervalMs: 20, timeoutMs: 15_000 });
    expect(active).toMatchObject({ id: vpn.id, status: 'active' });
  });

  it('pins a self-signed certificate by fingerprint on every connection, and refuses another', async () => {
    const { key } = await account(server);
    const fingerprint = new X509Certificate(readFileSync(server.running.certFile)).fingerprint256;
    const pinned = new Nimbus({ apiKey: key, baseUrl: server.url, fingerprint });
    clients.push(pinned);
    // Rounds of 1, 4 and 8 requests at once: each round opens connections the previous did not need, and
    // a later connection would resume the first one's TLS session, which shows no certificate to check.
    for (const parallel of [1, 4, 8]) {
      const answers = await Promise.all(Array.from({ length: parallel }, () => pinned.get('/v1/account')));
      expect(answers.map(({ data }) => data.id.slice(0, 5))).toEqual(Array(parallel).fill('acct_'));
    }
    const wrong = new Nimbus({ apiKey: key, baseUrl: server.url, fingerprint: 'AB'.repeat(32) });
    clients.push(wrong);
    const failure = (await wrong.get('/v1/account').catch((error: unknown) => error)) as { cause?: unknown };
    // fetch wraps connection failures: "fetch failed", caused by the mismatch.
    expect(failure.cause).toBeInstanceOf(CertificateMismatchError);
    expect((failure.cause as CertificateMismatchError).actual).toBe(fingerprint);
  });

  it('is the package @nimbus/sdk as built by npm run build', async () => {
    const name = '@nimbus/sdk';
    const built = (await import(name)) as Record<string, unknown>;
    expect(typeof built.Nimbus).toBe('function');
    expect(typeof built.NotFoundError).toBe('function');
  });
});
