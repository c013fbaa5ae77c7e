/**
 * The account endpoints over HTTPS: GET and PATCH /v1/account (validated; the plan is read-only here) and GET
 * /v1/account/quota (every quota of docs/design.md, "Quotas and plans", with the plan's limit, operator
 * overrides, usage).
 */
import { describe, expect, it } from 'vitest';
import { createPostgresDatabase, HAVE_POSTGRES, HAVE_REDIS, REDIS_URL, STORES } from './helpers/backends.js';
import { sleep, waitFor } from './helpers/common.js';
import { serverForSuite, startTestServer } from './helpers/server.js';

/** docs/design.md, "Quotas and plans", copied here on purpose: the test checks the code against the document. */
const QUOTAS = {
  free: {
    instances: 5,
    vcpus: 16,
    gpus: 0,
    volumes: 10,
    volume_storage_gb: 1000,
    snapshots: 20,
    firewall_rules: 50,
    vpns: 1,
    public_ips: 2,
    api_keys: 10,
    webhooks: 5,
    alerts: 10,
  },
  professional: {
    instances: 50,
    vcpus: 256,
    gpus: 8,
    volumes: 100,
    volume_storage_gb: 20000,
    snapshots: 500,
    firewall_rules: 500,
    vpns: 10,
    public_ips: 20,
    api_keys: 50,
    webhooks: 25,
    alerts: 100,
  },
  enterprise: {
    instances: 500,
    vcpus: 4096,
    gpus: 64,
    volumes: 1000,
    volume_storage_gb: 200000,
    snapshots: 5000,
    firewall_rules: 5000,
    vpns: 100,
    public_ips: 200,
    api_keys: 200,
    webhooks: 100,
    alerts: 1_000,
  },
} as const;

interface QuotaItem {
  name: string;
  limit: number;
  used: number;
}

let emailCounter = 0;
const uniqueEmail = (label: string) => `${label}-${Date.now()}-${++emailCounter}@example.org`;

describe.each(STORES)('account (%s)', (store) => {
  // Operator commands here run beside the server: read keys (plan, status) afresh on every request.
  const server = serverForSuite({ store, env: { NIMBUS_AUTH_CACHE_SECONDS: '0' } });

  async function quotas(key: string): Promise<Record<string, QuotaItem>> {
    const reply = await server.request('GET', '/v1/account/quota', { key });
    expect(reply.status, reply.text).toBe(200);
    const items = reply.body.data as QuotaItem[];
    return Object.fromEntries(items.map((q) => [q.name, q]));
  }

  it('GET /v1/account returns the account record', async () => {
    const account = await server.createAccount({ plan: 'free' });
    const reply = await server.request('GET', '/v1/account', { key: account.key });
    expect(reply.status).toBe(200);
    const data = reply.body.data;
    expect(Object.keys(data).sort()).toEqual(
      [
        'billing_email',
        'company',
        'created_at',
        'email',
        'id',
        'name',
        'plan',
        'status',
        'updated_at',
      ].sort(),
    );
    expect(data).toMatchObject({
      id: account.id,
      plan: 'free',
      status: 'active',
      company: null,
      billing_email: null,
    });
    expect(data.id).toMatch(/^acct_/);
    expect(data.email).toMatch(/@example\.com$/);
    expect(data.name.length).toBeGreaterThan(0);
    expect(new Date(data.created_at).toISOString()).toBe(data.created_at);
    expect(new Date(data.updated_at).toISOString()).toBe(data.updated_at);

    const listed = await server.admin<{ accounts: { id: string; email: string }[] }>('list-accounts');
    expect(listed.accounts.find((a) => a.id === account.id)?.email).toBe(data.email);
  });

  it('PATCH /v1/account changes name, company, email and billing_email', async () => {
    const account = await server.createAccount();
    const before = (await server.request('GET', '/v1/account', { key: account.key })).body.data;
    await sleep(5);
    const changes = {
      name: 'Ada Lovelace',
      company: 'Analytical Engines Ltd',
      email: uniqueEmail('ada'),
      billing_email: uniqueEmail('billing'),
    };
    const reply = await server.request('PATCH', '/v1/account', { key: account.key, body: changes });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.data).toMatchObject({
      ...changes,
      id: account.id,
      plan: before.plan,
      status: 'active',
    });
    expect(reply.body.data.created_at).toBe(before.created_at);
    expect(new Date(reply.body.data.updated_at).getTime()).toBeGreaterThan(
      new Date(before.updated_at).getTime(),
    );

    const after = await server.request('GET', '/v1/account', { key: account.key });
    expect(after.body.data).toMatchObject(changes);

    // One field at a time leaves the others alone; null clears the optional ones.
    const partial = await server.request('PATCH', '/v1/account', {
      key: account.key,
      body: { company: null, billing_email: null },
    });
    expect(partial.status).toBe(200);
    expect(partial.body.data).toMatchObject({
      name: 'Ada Lovelace',
      email: changes.email,
      company: null,
      billing_email: null,
    });
  });

  it('PATCH validates e-mail addresses and names: 400 invalid_request naming the field', async () => {
    const account = await server.createAccount();
    const cases: [Record<string, unknown>, string][] = [
      [{ email: 'not-an-email' }, 'email'],
      [{ email: 'two@@example.com' }, 'email'],
      [{ email: 'spaces in@example.com' }, 'email'],
      [{ billing_email: 'billing-at-example.com' }, 'billing_email'],
      [{ email: null }, 'email'],
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(101) }, 'name'],
      [{ name: { first: 'Ada' } }, 'name'],
    ];
    for (const [body, field] of cases) {
      const reply = await server.request('PATCH', '/v1/account', { key: account.key, body });
      expect(reply.status, JSON.stringify(body)).toBe(400);
      expect(reply.body.error.code).toBe('invalid_request');
      expect(reply.body.error.details.field, JSON.stringify(body)).toBe(field);
    }
    const unchanged = await server.request('GET', '/v1/account', { key: account.key });
    expect(unchanged.body.data.email).toMatch(/@example\.com$/);
    expect(unchanged.body.data.billing_email).toBeNull();
  });

  it('PATCH refuses fields it does not own (the plan, status, id) with 400 naming the field', async () => {
    const account = await server.createAccount({ plan: 'free' });
    for (const field of ['plan', 'status', 'id', 'created_at']) {
      const reply = await server.request('PATCH', '/v1/account', {
        key: account.key,
        body: { name: 'Sneaky', [field]: field === 'plan' ? 'enterprise' : 'x' },
      });
      expect(reply.status, field).toBe(400);
      expect(reply.body.error.code).toBe('invalid_request');
      expect(reply.body.error.details.field).toBe(field);
      expect(reply.body.error.message).toContain(field);
    }
    const after = (await server.request('GET', '/v1/account', { key: account.key })).body.data;
    expect(after.plan).toBe('free');
    expect(after.name).not.toBe('Sneaky');
  });

  it('PATCH with an empty object, no body or malformed JSON is 400', async () => {
    const account = await server.createAccount();
    const empty = await server.request('PATCH', '/v1/account', { key: account.key, body: {} });
    expect(empty.status).toBe(400);
    expect(empty.body.error.code).toBe('invalid_request');
    const none = await server.request('PATCH', '/v1/account', { key: account.key });
    expect(none.status).toBe(400);
    expect(none.body.error.code).toBe('invalid_request');
    const broken = await server.request('PATCH', '/v1/account', {
      key: account.key,
      rawBody: '{"name": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(broken.status).toBe(400);
    expect(broken.body.error.code).toBe('invalid_request');
  });

  it('an e-mail address another account uses is taken like a fresh one: the same answer, nothing told', async () => {
    const first = await server.createAccount();
    const second = await server.createAccount();
    const third = await server.createAccount();
    const taken = (await server.request('GET', '/v1/account', { key: first.key })).body.data.email as string;
    const fresh = `fresh-${Date.now()}@example.com`;

    // The same request, once to the first account's address and once to an address nobody uses.
    const shared = await server.request('PATCH', '/v1/account', {
      key: second.key,
      body: { email: taken, name: 'Same' },
    });
    const unused = await server.request('PATCH', '/v1/account', {
      key: third.key,
      body: { email: fresh, name: 'Same' },
    });
    expect(shared.status, shared.text).toBe(200);
    expect(unused.status, unused.text).toBe(200);
    expect(shared.body.data.email).toBe(taken);
    expect(unused.body.data.email).toBe(fresh);
    /** The answer with what differs between two accounts by nature (ids, times, the address sent) taken out. */
    const shape = (reply: typeof shared, address: string) =>
      JSON.parse(
        reply.text
          .replaceAll(address, '<address>')
          .replaceAll(reply.body.data.id, '<id>')
          .replaceAll(reply.body.metadata.request_id, '<request>')
          .replace(/"\d{4}-\d\d-\d\dT[^"]+"/g, '"<time>"'),
      );
    expect(shape(shared, taken)).toEqual(shape(unused, fresh));
    expect(Object.keys(shared.headers).sort()).toEqual(Object.keys(unused.headers).sort());
    // Both accounts keep the address: neither is changed by the other.
    expect((await server.request('GET', '/v1/account', { key: second.key })).body.data.email).toBe(taken);
    expect((await server.request('GET', '/v1/account', { key: first.key })).body.data.email).toBe(taken);

    // A billing address may be shared too (one finance team pays for several accounts).
    const billing = await server.request('PATCH', '/v1/account', {
      key: second.key,
      body: { billing_email: taken },
    });
    expect(billing.status).toBe(200);
  });

  it('GET /v1/account/quota lists all twelve quotas with the free plan limits and usage', async () => {
    const account = await server.createAccount({ plan: 'free' });
    const reply = await server.request('GET', '/v1/account/quota', { key: account.key });
    expect(reply.status).toBe(200);
    const items = reply.body.data as QuotaItem[];
    expect(items).toHaveLength(12);
    for (const item of items) expect(Object.keys(item).sort()).toEqual(['limit', 'name', 'used']);
    const byName = Object.fromEntries(items.map((q) => [q.name, q]));
    for (const [name, limit] of Object.entries(QUOTAS.free)) {
      expect(byName[name], name).toEqual({ name, limit, used: name === 'api_keys' ? 1 : 0 });
    }
  });

  it('quota limits follow the plan (professional, enterprise) and used counts real API keys', async () => {
    const account = await server.createAccount({ plan: 'professional' });
    let q = await quotas(account.key);
    for (const [name, limit] of Object.entries(QUOTAS.professional)) expect(q[name]?.limit, name).toBe(limit);
    expect(q.api_keys?.used).toBe(1);

    const created: string[] = [];
    for (let i = 0; i < 3; i++) {
      const reply = await server.request('POST', '/v1/account/api-keys', {
        key: account.key,
        body: { name: `q${i}` },
      });
      expect(reply.status).toBe(201);
      created.push(reply.body.data.id);
    }
    q = await quotas(account.key);
    expect(q.api_keys?.used).toBe(4);
    await server.request('DELETE', `/v1/account/api-keys/${created[0]}`, { key: account.key });
    q = await quotas(account.key);
    expect(q.api_keys?.used).toBe(3);
    for (const name of Object.keys(QUOTAS.free).filter((n) => n !== 'api_keys'))
      expect(q[name]?.used, name).toBe(0);

    // Another account's keys do not count here.
    const other = await server.createAccount({ plan: 'professional' });
    expect((await quotas(other.key)).api_keys?.used).toBe(1);

    // The bootstrap account is on the enterprise plan.
    const root = await quotas(server.rootKey);
    for (const [name, limit] of Object.entries(QUOTAS.enterprise))
      expect(root[name]?.limit, name).toBe(limit);
  });

  it('reflects admin set-quota overrides and admin set-plan', async () => {
    const account = await server.createAccount({ plan: 'free' });
    expect((await server.request('GET', '/v1/account', { key: account.key })).body.data.plan).toBe('free');

    const quota = await server.admin(
      'set-quota',
      '--account',
      account.id,
      '--name',
      'instances',
      '--limit',
      '7',
    );
    expect(quota).toEqual({ account_id: account.id, name: 'instances', limit: 7 });
    await server.admin('set-quota', '--account', account.id, '--name', 'gpus', '--limit', '0');
    let q = await quotas(account.key);
    expect(q.instances).toEqual({ name: 'instances', limit: 7, used: 0 });
    expect(q.vcpus?.limit).toBe(QUOTAS.free.vcpus);

    const plan = await server.admin('set-plan', '--account', account.id, '--plan', 'professional');
    expect(plan).toEqual({ account_id: account.id, plan: 'professional' });
    const me = await server.request('GET', '/v1/account', { key: account.key });
    expect(me.body.data.plan).toBe('professional');
    q = await quotas(account.key);
    // The plan moves every default; the operator's explicit overrides stay as set.
    expect(q.vcpus?.limit).toBe(QUOTAS.professional.vcpus);
    expect(q.api_keys?.limit).toBe(QUOTAS.professional.api_keys);
    expect(q.instances?.limit).toBe(7);
    expect(q.gpus?.limit).toBe(0);

    // A new override replaces the earlier one.
    await server.admin('set-quota', '--account', account.id, '--name', 'instances', '--limit', '70');
    expect((await quotas(account.key)).instances?.limit).toBe(70);

    // Overrides belong to one account only.
    const other = await server.createAccount({ plan: 'free' });
    expect((await quotas(other.key)).instances?.limit).toBe(QUOTAS.free.instances);
  });

  it('set-plan also moves the rate limit the account is held to', async () => {
    const account = await server.createAccount({ plan: 'free' });
    const free = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
    expect(free.body.data).toMatchObject({ limit: 1000, burst: 50 });
    expect(free.headers['x-ratelimit-limit']).toBe('1000');
    await server.admin('set-plan', '--account', account.id, '--plan', 'enterprise');
    const enterprise = await server.request('GET', '/v1/account/rate-limit', { key: account.key });
    expect(enterprise.body.data).toMatchObject({ limit: 100_000, burst: 1000 });
    expect(enterprise.headers['x-ratelimit-limit']).toBe('100000');
  });
});

describe.each(STORES)('account e-mail addresses (%s)', (store) => {
  const server = serverForSuite({ store });

  it('stores e-mail addresses lowercased; the operator creating an account at a used address is told who uses it', async () => {
    const first = await server.createAccount();
    const second = await server.createAccount();
    const mixed = await server.request('PATCH', '/v1/account', {
      key: first.key,
      body: { email: 'Ops.Team@Example.COM' },
    });
    expect(mixed.status).toBe(200);
    expect(mixed.body.data.email).toBe('ops.team@example.com');
    const same = await server.request('PATCH', '/v1/account', {
      key: second.key,
      body: { email: 'OPS.TEAM@example.com' },
    });
    expect(same.status).toBe(200);
    expect(same.body.data.email).toBe('ops.team@example.com');
    const created = await server.admin('create-account', '--email', 'ops.team@EXAMPLE.com');
    expect(created.account_id).toMatch(/^acct_/);
    expect([...created.accounts_sharing_email].sort()).toEqual([first.id, second.id].sort());
    const alone = await server.admin('create-account', '--email', `alone-${Date.now()}@example.com`);
    expect(alone.accounts_sharing_email).toEqual([]);
  });

  it('several accounts taking one address at the same moment all succeed (200, never 409 or 500)', async () => {
    const accounts = await Promise.all(Array.from({ length: 6 }, () => server.createAccount()));
    const address = `race-${Date.now()}@example.com`;
    const replies = await Promise.all(
      accounts.map((account) =>
        server.request('PATCH', '/v1/account', { key: account.key, body: { email: address } }),
      ),
    );
    expect(replies.map((r) => r.status)).toEqual(accounts.map(() => 200));
  });
});

describe.skipIf(!HAVE_REDIS || !HAVE_POSTGRES)('account changes across replicas (PostgreSQL + Redis)', () => {
  it('a PATCH on one replica is what the other replica shows next, though it had the account cached', async () => {
    const database = await createPostgresDatabase();
    const env = { NIMBUS_REDIS_URL: REDIS_URL, NIMBUS_AUTH_CACHE_SECONDS: '300' };
    const a = await startTestServer({ databaseUrl: database.url, env });
    const b = await startTestServer({ databaseUrl: database.url, env });
    try {
      const account = await a.createAccount();
      expect((await b.request('GET', '/v1/account', { key: account.key })).body.data.company).toBeNull();
      const patched = await a.request('PATCH', '/v1/account', {
        key: account.key,
        body: { company: 'Replicated Ltd' },
      });
      expect(patched.status).toBe(200);
      // The replica that made the change shows it at once (its cache held the account too).
      expect((await a.request('GET', '/v1/account', { key: account.key })).body.data.company).toBe(
        'Replicated Ltd',
      );
      // The notice travels by Redis pub/sub: give it a moment, far less than the 300 s cache lifetime.
      let company: string | null = null;
      await waitFor(
        'the other replica to show the change',
        async () => {
          company = (await b.request('GET', '/v1/account', { key: account.key })).body.data.company;
          return company === 'Replicated Ltd' ? company : undefined;
        },
        { timeoutMs: 1_000, intervalMs: 20, lastSeen: () => String(company) },
      );
    } finally {
      await a.close();
      await b.close();
      await database.drop();
    }
  });
});
