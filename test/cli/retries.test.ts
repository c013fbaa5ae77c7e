/**
 * A real 429: a free account (1,000 requests an hour, burst 50) spends its burst, and while a competing
 * client takes every token the bucket refills (one each 3.6 s), `nimbus instances create` is refused again
 * and again. It retries with the delays of docs/design.md, "Client retries" (doubling from 1 s) and never
 * sooner than the server's Retry-After, reports each retry on stderr with the one Idempotency-Key every
 * attempt carries, and succeeds once the competitor stops: exactly one instance exists.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { cliFor, ensureBuilt, runNimbus } from '../helpers/cli.js';
import { sleep } from '../helpers/common.js';
import { serverForSuite } from '../helpers/server.js';

// Each test runs bin/nimbus several times (about a second each, far more on a loaded machine).
vi.setConfig({ testTimeout: 180_000 });

const RETRY_LINE =
  /^429 rate limited: retry (\d) in (\d+\.\d) s \(POST \/v1\/instances, Retry-After (\d+) s, Idempotency-Key ([\w-]+), request_id req_\w+\)$/gm;

describe('nimbus retries a rate-limited create', () => {
  // Key cache off: the operator's rate-limit change at the end applies to the very next request.
  const server = serverForSuite({ env: { NIMBUS_AUTH_CACHE_SECONDS: '0' } });

  beforeAll(() => ensureBuilt(), 180_000);

  it('waits 1 s doubling (at least Retry-After) with one Idempotency-Key, and makes one instance', {
    timeout: 90_000,
  }, async () => {
    const free = await server.createAccount({ plan: 'free' });
    const cli = cliFor(server, free.key);
    // Spend the burst.
    for (let spent = 0; ; spent++) {
      const reply = await server.request('GET', '/v1/account', { key: free.key });
      if (reply.status === 429) break;
      expect(spent, 'the burst of a free account is 50').toBeLessThan(60);
    }
    // The competitor takes each token as soon as it is back, until the CLI has been refused three times.
    let competing = true;
    const competitor = (async () => {
      while (competing) {
        await server.request('GET', '/v1/account', { key: free.key });
        await sleep(50);
      }
    })();
    const args = [
      '-v',
      'instances',
      'create',
      'rl-1',
      '--type',
      'compute-2x',
      '--region',
      'us-east-1',
      '--image',
      'ubuntu-24.04',
      '-o',
      'json',
    ];
    const run = await runNimbus(args, {
      env: cli.env,
      timeoutMs: 80_000,
      onStderr: (soFar) => {
        if ((soFar.match(RETRY_LINE) ?? []).length >= 3) competing = false;
      },
    });
    competing = false;
    await competitor;

    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ name: 'rl-1', status: 'starting' });
    const retries = [...run.stderr.matchAll(RETRY_LINE)].map((match) => ({
      retry: Number(match[1]),
      delaySeconds: Number(match[2]),
      retryAfter: Number(match[3]),
      key: match[4],
    }));
    expect(retries.map((retry) => retry.retry)).toEqual([1, 2, 3]);
    for (const { retry, delaySeconds, retryAfter } of retries) {
      const doubling = 2 ** (retry - 1); // 1 s, 2 s, 4 s
      expect(delaySeconds, `retry ${retry}`).toBeGreaterThanOrEqual(Math.max(doubling, retryAfter));
      // No longer than the doubling with its 20 % jitter, or what the server asked for.
      expect(delaySeconds, `retry ${retry}`).toBeLessThanOrEqual(Math.max(doubling * 1.2, retryAfter) + 0.05);
    }
    // The free plan refills a token every 3.6 s, so the server asked for up to 4 s each time.
    expect(Math.max(...retries.map((retry) => retry.retryAfter))).toBeLessThanOrEqual(4);
    expect(new Set(retries.map((retry) => retry.key)).size).toBe(1);

    await server.admin('set-rate-limit', '--account', free.id, '--per-hour', '100000', '--burst', '1000');
    const listed = await server.request('GET', '/v1/instances', { key: free.key });
    expect(listed.body.pagination.total_items).toBe(1);
  });

  it('an explicit --idempotency-key makes a repeated create return the same instance', async () => {
    const cli = cliFor(server, (await server.createAccount({ perHour: 1_000_000, burst: 100_000 })).key);
    const args = [
      'instances',
      'create',
      'once',
      '--type',
      'compute-2x',
      '--region',
      'us-east-1',
      '--image',
      'ubuntu-24.04',
      '--idempotency-key',
      'deploy-42',
    ];
    const first = await cli.json(...args);
    const second = await cli.json(...args);
    expect(second.id).toBe(first.id);
    expect(await cli.json<any[]>('instances', 'list')).toHaveLength(1);
  });
});
