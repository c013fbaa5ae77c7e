import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { createPostgresDatabase, HAVE_POSTGRES, HAVE_REDIS, REDIS_URL } from './helpers/backends.js';
import { expectError } from './helpers/common.js';
import { type Reply, startTestServer, type TestServer } from './helpers/server.js';

const HOUR_MS = 3_600_000;

interface RateHeaders {
  limit: number;
  remaining: number;
  reset: number;
}

/** The three headers, each required to be a plain integer. */
function rateHeaders(reply: Reply): RateHeaders {
  const read = (name: string) => {
    const value = reply.headers[name];
    expect(value, `${name} on a ${reply.status}`).toMatch(/^\d+$/);
    return Number(value);
  };
  return {
    limit: read('x-ratelimit-limit'),
    remaining: read('x-ratelimit-remaining'),
    reset: read('x-ratelimit-reset'),
  };
}

/** The end of the clock hour containing `ms`, in Unix seconds. */
function hourEnd(ms: number): number {
  return (Math.floor(ms / HOUR_MS) + 1) * 3600;
}

/** A 429 as docs/design.md, "Rate limits" words it, on top of the error envelope every refusal has. */
function expectRateLimited(reply: Reply, retryAfter: number): void {
  expect(expectError(reply, 429, 'rate_limit_exceeded')).toMatchObject({
    message: `Rate limit exceeded, retry in ${retryAfter} seconds`,
    retry_after: retryAfter,
  });
  expect(reply.headers['retry-after']).toBe(String(retryAfter));
}

describe('rate limits (in-process counters, manual clock)', () => {
  let server: TestServer;
  // Ten minutes into the current hour; the clock only moves forward from here.
  const clock = new ManualClock(new Date(Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 600_000));

  beforeAll(async () => {
    // No auth cache: an operator's change made in process (admin) is seen by the next request.
    server = await startTestServer({ clock, env: { NIMBUS_AUTH_CACHE_SECONDS: '0' } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('sends the three headers on a 200, counting down the account window', async () => {
    const account = await server.createAccount({ plan: 'professional' });
    const first = await server.request('GET', '/v1/account', { key: account.key });
    const second = await server.request('GET', '/v1/account', { key: account.key });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    const reset = hourEnd(clock.now().getTime());
    expect(rateHeaders(first)).toEqual({ limit: 10_000, remaining: 9_999, reset });
    expect(rateHeaders(second)).toEqual({ limit: 10_000, remaining: 9_998, reset });
  });

  it('sends them on 401s, counted per client IP with the Free plan numbers', async () => {
    const missing = await server.request('GET', '/v1/account');
    expect(missing.status).toBe(401);
    expect(missing.body.error.code).toBe('authentication_failed');
    const missingHeaders = rateHeaders(missing);
    expect(missingHeaders.limit).toBe(1_000);
    expect(missingHeaders.reset).toBe(hourEnd(clock.now().getTime()));

    const wrong = await server.request('GET', '/v1/account', {
      key: 'nmb_thisIsNotAKeyThisServerEverIssued',
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe('authentication_failed');
    // The same budget: a wrong key spends what a missing one spent from.
    expect(rateHeaders(wrong)).toEqual({ ...missingHeaders, remaining: missingHeaders.remaining - 1 });

    const viaHeader = await server.request('GET', '/v1/account', { headers: { 'X-API-Key': 'garbage' } });
    expect(viaHeader.status).toBe(401);
    expect(rateHeaders(viaHeader).remaining).toBe(missingHeaders.remaining - 2);
  });

  it('sends them on a 403 (permission missing), from the account budget', async () => {
    const account = await server.createAccount({ plan: 'professional' });
    const narrow = await server.request('POST', '/v1/account/api-keys', {
      key: account.key,
      body: { name: 'instances only', permissions: ['instances:read'] },
    });
    expect(narrow.status).toBe(201);
    const forbidden = await server.request('GET', '/v1/account', { key: narrow.body.data.key });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe('forbidden');
    expect(rateHeaders(forbidden)).toMatchObject({ limit: 10_000, remaining: 9_998 });
  });

  it('sends them on a 403 for a suspended account', async () => {
    const account = await server.createAccount({ plan: 'free' });
    await server.admin('set-account-status', '--account', account.id, '--status', 'suspended');
    const reply = await server.request('GET', '/v1/account', { key: account.key });
    expect(reply.status).toBe(403);
    expect(rateHeaders(reply)).toMatchObject({ limit: 1_000, remaining: 999 });
  });

  it('sends them on 404s: a missing resource and an unknown route', async () => {
    const account = await server.createAccount({ plan: 'professional' });
    const missing = await server.request('GET', '/v1/account/api-keys/key_doesnotexist', {
      key: account.key,
    });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
    expect(rateHeaders(missing)).toMatchObject({ limit: 10_000, remaining: 9_999 });

    const unknown = await server.request('GET', '/v1/no-such-thing', { key: account.key });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    expect(rateHeaders(unknown)).toMatchObject({ limit: 10_000, remaining: 9_998 });
  });

  it('sends them on 400s', async () => {
    const account = await server.createAccount({ plan: 'professional' });
    const invalid = await server.request('GET', '/v1/account/api-keys?limit=0', { key: account.key });
    expect(invalid.status).toBe(400);
    expect(rateHeaders(invalid)).toMatchObject({ limit: 10_000, remaining: 9_999 });
  });

  it('answers 429 with retry_after, Retry-After and the delay in the message once the burst is spent', async () => {
    const account = await server.createAccount({ perHour: 1000, burst: 3 });
    for (let i = 1; i <= 3; i += 1) {
      const reply = await server.request('GET', '/v1/account', { key: account.key });
      expect(reply.status, `request ${i}`).toBe(200);
      expect(rateHeaders(reply).remaining).toBe(1000 - i);
    }
    const limited = await server.request('GET', '/v1/account', { key: account.key });
    // An empty bucket refills at 1000/3600 tokens a second: a whole token takes 3.6 s, so 4.
    expectRateLimited(limited, 4);
    // The 429 carries the headers too. It says Remaining 0 (nothing passes before Retry-After), though
    // the refused request took nothing from the window: the rate-limit route still reports 997 left.
    expect(rateHeaders(limited)).toEqual({
      limit: 1000,
      remaining: 0,
      reset: hourEnd(clock.now().getTime()),
    });
    const budget = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
    expect(budget.body.data).toMatchObject({ remaining: 997, burst_remaining: 0 });
    expect(limited.headers['x-request-id']).toMatch(/^req_/);

    // A refused request does not move the wait: still 4 s at the same instant.
    expectRateLimited(await server.request('GET', '/v1/account', { key: account.key }), 4);

    // Three seconds on, 0.83 of a token is back: one more second to wait.
    clock.advance(3_000);
    expectRateLimited(await server.request('GET', '/v1/account', { key: account.key }), 1);

    // Once the token is whole the request passes, and only one passes.
    clock.advance(1_000);
    const passed = await server.request('GET', '/v1/account', { key: account.key });
    expect(passed.status).toBe(200);
    expect(rateHeaders(passed).remaining).toBe(996);
    expect((await server.request('GET', '/v1/account', { key: account.key })).status).toBe(429);
  });

  it('limits a burst of 20 concurrent requests to exactly the bucket size', async () => {
    const account = await server.createAccount({ perHour: 1000, burst: 5 });
    const replies = await Promise.all(
      Array.from({ length: 20 }, () => server.request('GET', '/v1/account', { key: account.key })),
    );
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    // Each passing request saw its own count: 999 down to 995, no two alike.
    const remaining = replies.filter((r) => r.status === 200).map((r) => rateHeaders(r).remaining);
    expect(remaining.sort((a, b) => b - a)).toEqual([999, 998, 997, 996, 995]);
  });

  it('answers 429 until the hour ends once the window is spent, then starts a new window', async () => {
    // Move to ten minutes into the next hour: 50 minutes of window left.
    const hourStart = Math.ceil(clock.now().getTime() / HOUR_MS) * HOUR_MS;
    clock.set(new Date(hourStart + 600_000));
    const account = await server.createAccount({ perHour: 3, burst: 10 });
    for (let i = 1; i <= 3; i += 1) {
      expect((await server.request('GET', '/v1/account', { key: account.key })).status).toBe(200);
    }
    const limited = await server.request('GET', '/v1/account', { key: account.key });
    const headers = rateHeaders(limited);
    expect(headers).toEqual({ limit: 3, remaining: 0, reset: hourStart / 1000 + 3600 });
    // The wait is exactly the seconds from now to X-RateLimit-Reset, though tokens are left.
    expectRateLimited(limited, headers.reset - Math.floor(clock.now().getTime() / 1000));
    expect(limited.body.error.retry_after).toBe(3000);

    clock.advance(2_999_000);
    expectRateLimited(await server.request('GET', '/v1/account', { key: account.key }), 1);

    clock.advance(1_000);
    const next = await server.request('GET', '/v1/account', { key: account.key });
    expect(next.status).toBe(200);
    expect(rateHeaders(next)).toEqual({ limit: 3, remaining: 2, reset: headers.reset + 3600 });
  });

  it('GET /v1/account/rate-limit reports the budget without consuming it', async () => {
    const account = await server.createAccount({ perHour: 100, burst: 5 });
    await server.request('GET', '/v1/account', { key: account.key });
    await server.request('GET', '/v1/account', { key: account.key });
    const reset = hourEnd(clock.now().getTime());
    for (let i = 0; i < 5; i += 1) {
      const status = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
      expect(status.status).toBe(200);
      expect(rateHeaders(status)).toEqual({ limit: 100, remaining: 98, reset });
      expect(status.body.data).toEqual({
        limit: 100,
        remaining: 98,
        reset,
        burst: 5,
        burst_remaining: 3,
        window_seconds: 3600,
      });
    }
    const after = await server.request('GET', '/v1/account', { key: account.key });
    expect(rateHeaders(after).remaining).toBe(97);

    // With the bucket empty, requests are refused but the status endpoint still answers.
    await server.request('GET', '/v1/account', { key: account.key });
    await server.request('GET', '/v1/account', { key: account.key });
    expect((await server.request('GET', '/v1/account', { key: account.key })).status).toBe(429);
    const empty = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
    expect(empty.status).toBe(200);
    expect(empty.body.data).toMatchObject({ remaining: 95, burst_remaining: 0 });
  });

  it('uses each plan’s numbers', async () => {
    const expected = [
      { plan: 'free', limit: 1_000, burst: 50 },
      { plan: 'professional', limit: 10_000, burst: 200 },
      { plan: 'enterprise', limit: 100_000, burst: 1_000 },
    ];
    for (const { plan, limit, burst } of expected) {
      const account = await server.createAccount({ plan });
      const reply = await server.request('GET', '/v1/account', { key: account.key });
      expect(reply.status).toBe(200);
      expect(rateHeaders(reply).limit, plan).toBe(limit);
      const status = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
      expect(status.body.data, plan).toMatchObject({ limit, burst, remaining: limit - 1 });
    }
    // The bootstrap account is on the enterprise plan.
    const root = await server.request('GET', '/v1/account', { key: server.rootKey });
    expect(rateHeaders(root).limit).toBe(100_000);
  });

  it('follows a plan change and a per-account override made by the operator', async () => {
    const account = await server.createAccount({ plan: 'professional' });
    const other = await server.createAccount({ plan: 'professional' });
    const before = await server.request('GET', '/v1/account', { key: account.key });
    expect(rateHeaders(before).limit).toBe(10_000);

    await server.admin('set-plan', '--account', account.id, '--plan', 'free');
    const free = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
    expect(free.body.data).toMatchObject({ limit: 1_000, burst: 50 });

    await server.admin('set-rate-limit', '--account', account.id, '--per-hour', '5', '--burst', '2');
    const status = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
    expect(status.body.data).toMatchObject({ limit: 5, remaining: 4, burst: 2, burst_remaining: 2 });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const reply = await server.request('GET', '/v1/account', { key: account.key });
      expect(rateHeaders(reply).limit).toBe(5);
      statuses.push(reply.status);
    }
    expect(statuses).toEqual([200, 200, 429]);

    // Nobody else is touched.
    const untouched = await server.request('GET', '/v1/account', { key: other.key });
    expect(untouched.status).toBe(200);
    expect(rateHeaders(untouched)).toMatchObject({ limit: 10_000, remaining: 9_999 });
  });
});

describe('rate limits before authentication (per client IP)', () => {
  let server: TestServer;
  const clock = new ManualClock(new Date(Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 600_000));

  beforeAll(async () => {
    server = await startTestServer({ clock });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('gives callers without a valid key the Free burst of 50, then 429 before judging the key', async () => {
    for (let i = 1; i <= 50; i += 1) {
      const reply = await server.request('GET', '/v1/account', { key: `nmb_guess${i}` });
      expect(reply.status).toBe(401);
      expect(rateHeaders(reply)).toMatchObject({ limit: 1_000, remaining: 1_000 - i });
    }
    const limited = await server.request('GET', '/v1/account', { key: 'nmb_guess51' });
    expectRateLimited(limited, 4);
    // Nothing passes before Retry-After: the 429 says Remaining 0, though 950 are left in the window.
    expect(rateHeaders(limited)).toMatchObject({ limit: 1_000, remaining: 0 });
    expectRateLimited(await server.request('GET', '/v1/account'), 4);

    // A valid key is counted against its account, not the exhausted per-IP budget.
    const valid = await server.request('GET', '/v1/account', { key: server.rootKey });
    expect(valid.status).toBe(200);
    expect(rateHeaders(valid).limit).toBe(100_000);
  });
});

describe.skipIf(!HAVE_REDIS || !HAVE_POSTGRES)('rate limits shared through Redis by two servers', () => {
  let database: { url: string; drop: () => Promise<void> };
  let a: TestServer;
  let b: TestServer;
  const started: TestServer[] = [];

  beforeAll(async () => {
    database = await createPostgresDatabase();
    const options = { databaseUrl: database.url, env: { NIMBUS_REDIS_URL: REDIS_URL } };
    a = await startTestServer(options);
    started.push(a);
    // A second replica: same database and Redis, a data dir of its own.
    b = await startTestServer(options);
    started.push(b);
  });
  afterAll(async () => {
    for (const server of started.reverse()) await server.close();
    await database?.drop();
  });

  it('spends one budget across both servers: exactly burst requests pass in total', async () => {
    // 100 an hour refills a token every 36 s, far longer than this test takes.
    const account = await a.createAccount({ perHour: 100, burst: 4 });
    const replies: Reply[] = [];
    for (const server of [a, b, a, b])
      replies.push(await server.request('GET', '/v1/account', { key: account.key }));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const headers = replies.map(rateHeaders);
    // One window too: each server sees the count the other left (unless the hour turned meanwhile).
    if (new Set(headers.map((h) => h.reset)).size === 1) {
      expect(headers.map((h) => h.remaining)).toEqual([99, 98, 97, 96]);
    }
    const fifthOnA = await a.request('GET', '/v1/account', { key: account.key });
    const fifthOnB = await b.request('GET', '/v1/account', { key: account.key });
    for (const limited of [fifthOnA, fifthOnB]) {
      expect(limited.status).toBe(429);
      expect(limited.body.error.code).toBe('rate_limit_exceeded');
      expect(limited.body.error.retry_after).toBeGreaterThanOrEqual(1);
      expect(limited.headers['retry-after']).toBe(String(limited.body.error.retry_after));
    }
    // Both servers report the same state through the status endpoint.
    const statusA = await a.request('GET', '/v1/account/rate-limit', { key: account.key });
    const statusB = await b.request('GET', '/v1/account/rate-limit', { key: account.key });
    expect(statusA.body.data.burst_remaining).toBe(0);
    expect(statusB.body.data).toEqual(statusA.body.data);
  });

  it('lets exactly burst requests through when 20 arrive at once on both servers', async () => {
    const account = await a.createAccount({ perHour: 100, burst: 5 });
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 === 0 ? a : b).request('GET', '/v1/account', { key: account.key }),
      ),
    );
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
  });

  it('by contrast, two servers without Redis each keep a budget of their own', async () => {
    const c = await startTestServer({ databaseUrl: database.url });
    started.push(c);
    const d = await startTestServer({ databaseUrl: database.url });
    started.push(d);

    const account = await a.createAccount({ perHour: 100, burst: 4 });
    const statuses: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      const server = i % 2 === 0 ? c : d;
      statuses.push((await server.request('GET', '/v1/account', { key: account.key })).status);
    }
    // Four on each server: twice the budget the account was given.
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 429, 429]);
  });
});
