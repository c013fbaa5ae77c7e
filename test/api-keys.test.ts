/**
 * API keys over HTTPS: creation (shown once), listing, revocation that beats the verified-key cache,
 * SHA-256-only storage, permissions and escalation, expiry, last use, the 90-day rotation warning, the
 * api_keys quota, both ways of presenting a key, the events written, and logs that never hold a key.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import type { CreatedApiKey } from '../src/resources/account/api-key-service.js';
import { STORES } from './helpers/backends.js';
import { sleep, waitFor } from './helpers/common.js';
import { sendRequest, serverForSuite, type TestServer } from './helpers/server.js';

type CreatedKey = CreatedApiKey;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const DAY_MS = 24 * 3600 * 1000;

async function createKey(
  server: TestServer,
  key: string,
  body: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<CreatedKey> {
  const reply = await server.request('POST', '/v1/account/api-keys', {
    key,
    body: { name: `key-${randomBytes(3).toString('hex')}`, ...body },
    headers,
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data as CreatedKey;
}

/** Every row of every table, as text: where a plain key must never turn up. */
async function everyStoredRow(server: TestServer): Promise<string> {
  const db = server.running.backends.store.db;
  const tables = await db.introspection.getTables();
  let dump = '';
  for (const table of tables) {
    const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(table.name)}`.execute(db);
    dump += `${table.name}: ${JSON.stringify(rows)}\n`;
  }
  return dump;
}

describe.each(STORES)('API keys (%s)', (store) => {
  const server = serverForSuite({ store });

  it('creates a key shown once (201, nmb_…), then never shows it again in get or list', async () => {
    const reply = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 'ci deploy', permissions: ['instances:write', 'account:read'] },
    });
    expect(reply.status).toBe(201);
    const created = reply.body.data as CreatedKey;
    expect(created.key).toMatch(/^nmb_[0-9A-Za-z]{43}$/);
    expect(created).toMatchObject({
      name: 'ci deploy',
      permissions: ['account:read', 'instances:write'],
      expires_at: null,
      last_used_at: null,
      prefix: created.key.slice(0, 10),
    });
    expect(created.id).toMatch(/^key_[0-9a-z]{26}$/);
    expect(new Date(created.created_at).toISOString()).toBe(created.created_at);

    const one = await server.request('GET', `/v1/account/api-keys/${created.id}`, { key: server.rootKey });
    expect(one.status).toBe(200);
    expect(one.body.data).toMatchObject({ id: created.id, name: 'ci deploy', prefix: created.prefix });
    expect(one.body.data).not.toHaveProperty('key');
    expect(one.body.data).not.toHaveProperty('key_hash');
    expect(one.text).not.toContain(created.key);

    const list = await server.request('GET', '/v1/account/api-keys?limit=100', { key: server.rootKey });
    expect(list.status).toBe(200);
    const listed = (list.body.data as CreatedKey[]).find((k) => k.id === created.id);
    expect(listed).toMatchObject({ id: created.id, name: 'ci deploy' });
    for (const item of list.body.data) expect(item).not.toHaveProperty('key');
    expect(list.text).not.toContain(created.key);

    // The new key works on its own.
    const asNew = await server.request('GET', '/v1/account', { key: created.key });
    expect(asNew.status).toBe(200);
  });

  it('lists keys with the pagination object, page by page', async () => {
    const account = await server.createAccount();
    for (let i = 0; i < 4; i++) await createKey(server, account.key, { name: `paged-${i}` });
    // The admin key plus four.
    const first = await server.request('GET', '/v1/account/api-keys?limit=2&sort=name&order=asc', {
      key: account.key,
    });
    expect(first.status).toBe(200);
    expect(first.body.pagination).toEqual({
      page: 1,
      limit: 2,
      total_items: 5,
      total_pages: 3,
      has_next: true,
      has_prev: false,
    });
    expect(first.body.data.map((k: CreatedKey) => k.name)).toEqual(['admin', 'paged-0']);
    const last = await server.request('GET', '/v1/account/api-keys?limit=2&page=3&sort=name&order=asc', {
      key: account.key,
    });
    expect(last.body.pagination).toMatchObject({ page: 3, has_next: false, has_prev: true });
    expect(last.body.data.map((k: CreatedKey) => k.name)).toEqual(['paged-3']);
  });

  it('control: a verified key really is served from the cache for a while', async () => {
    // Removing the row behind the service's back leaves the cached key working; this is what makes
    // the next test meaningful (the revocation must reach the cache, not just the table).
    const created = await createKey(server, server.rootKey);
    expect((await server.request('GET', '/v1/account', { key: created.key })).status).toBe(200);
    await server.running.backends.store.db.deleteFrom('api_keys').where('id', '=', created.id).execute();
    expect((await server.request('GET', '/v1/account', { key: created.key })).status).toBe(200);
  });

  it('revokes a key: the deleted key, just used and cached, gets 401 on the very next request', async () => {
    const created = await createKey(server, server.rootKey);
    for (let i = 0; i < 3; i++) {
      expect((await server.request('GET', '/v1/account', { key: created.key })).status).toBe(200);
    }
    const deleted = await server.request('DELETE', `/v1/account/api-keys/${created.id}`, {
      key: server.rootKey,
    });
    expect(deleted.status).toBe(200);
    expect(deleted.body.data).toMatchObject({ id: created.id, name: created.name });
    expect(deleted.text).not.toContain(created.key);

    const after = await server.request('GET', '/v1/account', { key: created.key });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('authentication_failed');
    const viaHeader = await server.request('GET', '/v1/account', { headers: { 'x-api-key': created.key } });
    expect(viaHeader.status).toBe(401);

    const gone = await server.request('GET', `/v1/account/api-keys/${created.id}`, { key: server.rootKey });
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe('not_found');
    const again = await server.request('DELETE', `/v1/account/api-keys/${created.id}`, {
      key: server.rootKey,
    });
    expect(again.status).toBe(404);
  });

  it('a key can revoke itself, and is refused at once afterwards', async () => {
    const created = await createKey(server, server.rootKey, { permissions: ['account:write'] });
    const deleted = await server.request('DELETE', `/v1/account/api-keys/${created.id}`, {
      key: created.key,
    });
    expect(deleted.status).toBe(200);
    expect((await server.request('GET', '/v1/account', { key: created.key })).status).toBe(401);
  });

  it('stores keys only as SHA-256: no column holds the key, nor does any row of any table', async () => {
    const created = await createKey(server, server.rootKey);
    // An idempotent create keeps its response for replays: that copy must not hold the key either.
    const idempotent = await createKey(
      server,
      server.rootKey,
      {},
      { 'idempotency-key': `idem-${created.id}` },
    );
    const db = server.running.backends.store.db;
    for (const k of [created, idempotent]) {
      const row = await db
        .selectFrom('api_keys')
        .selectAll()
        .where('id', '=', k.id)
        .executeTakeFirstOrThrow();
      expect(row.key_hash).toBe(sha256(k.key));
      expect(Object.values(row)).not.toContain(k.key);
    }
    await server.running.backends.services.apiKeys.flushLastUsed();
    const dump = await everyStoredRow(server);
    expect(dump).toContain(created.id);
    for (const k of [created, idempotent, { key: server.rootKey }]) expect(dump).not.toContain(k.key);
  });

  it('an Idempotency-Key replay of a key creation makes no second key and does not show the key again', async () => {
    const account = await server.createAccount();
    const headers = { 'idempotency-key': `replay-${randomBytes(4).toString('hex')}` };
    const body = { name: 'replayed', permissions: ['account:read'] };
    const first = await server.request('POST', '/v1/account/api-keys', { key: account.key, body, headers });
    expect(first.status).toBe(201);
    const plain = first.body.data.key as string;
    expect(plain).toMatch(/^nmb_/);
    const replay = await server.request('POST', '/v1/account/api-keys', { key: account.key, body, headers });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data).toMatchObject({ id: first.body.data.id, name: 'replayed' });
    expect(replay.body.data).not.toHaveProperty('key');
    expect(replay.text).not.toContain(plain);
    const listed = await server.request('GET', '/v1/account/api-keys', { key: account.key });
    expect(listed.body.pagination.total_items).toBe(2);
    expect((await server.request('GET', '/v1/account', { key: plain })).status).toBe(200);
  });

  it('a key with only account:read can read but gets 403 forbidden on creating keys and PATCH /v1/account', async () => {
    const reader = await createKey(server, server.rootKey, { permissions: ['account:read'] });
    expect((await server.request('GET', '/v1/account', { key: reader.key })).status).toBe(200);
    expect((await server.request('GET', '/v1/account/api-keys', { key: reader.key })).status).toBe(200);

    const create = await server.request('POST', '/v1/account/api-keys', {
      key: reader.key,
      body: { name: 'nope', permissions: ['account:read'] },
    });
    expect(create.status).toBe(403);
    expect(create.body.error.code).toBe('forbidden');
    const patch = await server.request('PATCH', '/v1/account', { key: reader.key, body: { name: 'nope' } });
    expect(patch.status).toBe(403);
    expect(patch.body.error.code).toBe('forbidden');
    expect((await server.request('GET', '/v1/account', { key: server.rootKey })).body.data.name).not.toBe(
      'nope',
    );
  });

  it('no privilege escalation: an account:write key cannot mint * or billing:read', async () => {
    const writer = await createKey(server, server.rootKey, { permissions: ['account:write'] });
    for (const permissions of [['*'], ['billing:read'], ['account:write', 'instances:read']]) {
      const reply = await server.request('POST', '/v1/account/api-keys', {
        key: writer.key,
        body: { name: 'escalate', permissions },
      });
      expect(reply.status, JSON.stringify(permissions)).toBe(403);
      expect(reply.body.error.code).toBe('forbidden');
      expect(reply.text).not.toMatch(/nmb_/);
    }
    const names = (
      await server.request('GET', '/v1/account/api-keys?limit=100', { key: server.rootKey })
    ).body.data.map((k: CreatedKey) => k.name);
    expect(names).not.toContain('escalate');

    // What it holds it may hand on, and by default a new key gets the creator's permissions.
    const same = await createKey(server, writer.key, { permissions: ['account:write'] });
    expect(same.permissions).toEqual(['account:write']);
    const inherited = await createKey(server, writer.key);
    expect(inherited.permissions).toEqual(['account:write']);
  });

  it('write implies read, both for requests and for what a key may grant', async () => {
    const writer = await createKey(server, server.rootKey, { permissions: ['account:write'] });
    expect((await server.request('GET', '/v1/account', { key: writer.key })).status).toBe(200);
    expect((await server.request('GET', '/v1/account/quota', { key: writer.key })).status).toBe(200);
    const reader = await createKey(server, writer.key, { permissions: ['account:read'] });
    expect(reader.permissions).toEqual(['account:read']);
    // Asking for read and write of one area keeps only write (it covers read).
    const both = await createKey(server, server.rootKey, { permissions: ['account:read', 'account:write'] });
    expect(both.permissions).toEqual(['account:write']);
  });

  it('rejects an unknown permission with 400 naming the field and the allowed values', async () => {
    const reply = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 'bad', permissions: ['account:read', 'account:admin'] },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error.code).toBe('invalid_request');
    expect(reply.body.error.details.field).toMatch(/^permissions/);
    expect(reply.body.error.details.value).toBe('account:admin');
    expect(reply.body.error.details.allowed_values).toEqual(expect.arrayContaining(['*', 'account:read']));
    expect(reply.body.error.details.allowed_values).not.toContain('account:admin');
  });

  it('rejects a missing name, an empty permission list and unknown fields with 400', async () => {
    for (const body of [
      { permissions: ['account:read'] },
      { name: 'x', permissions: [] },
      { name: 'x', scope: 'all' },
    ]) {
      const reply = await server.request('POST', '/v1/account/api-keys', { key: server.rootKey, body });
      expect(reply.status, JSON.stringify(body)).toBe(400);
      expect(reply.body.error.code).toBe('invalid_request');
      expect(reply.body.error.details.field).toBeTruthy();
    }
  });

  it('refuses expires_at in the past or not a date-time (400), and a key that expires stops working (401)', async () => {
    const past = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 'old', expires_at: new Date(Date.now() - 60_000).toISOString() },
    });
    expect(past.status).toBe(400);
    expect(past.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'expires_at' } });
    const garbage = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 'old', expires_at: 'next tuesday' },
    });
    expect(garbage.status).toBe(400);
    expect(garbage.body.error.details.field).toBe('expires_at');

    const expiresAt = new Date(Date.now() + 2_500);
    const shortLived = await createKey(server, server.rootKey, { expires_at: expiresAt.toISOString() });
    expect(shortLived.expires_at).toBe(expiresAt.toISOString());
    // Used (and cached) while valid…
    expect((await server.request('GET', '/v1/account', { key: shortLived.key })).status).toBe(200);
    await sleep(expiresAt.getTime() - Date.now() + 250);
    // …refused once past, cache or not.
    const expired = await server.request('GET', '/v1/account', { key: shortLived.key });
    expect(expired.status).toBe(401);
    expect(expired.body.error.code).toBe('authentication_failed');
  });

  it('sets last_used_at after the key is used', async () => {
    const created = await createKey(server, server.rootKey);
    const { apiKeys } = server.running.backends.services;
    await apiKeys.flushLastUsed();
    const before = await server.request('GET', `/v1/account/api-keys/${created.id}`, { key: server.rootKey });
    expect(before.body.data.last_used_at).toBeNull();

    const usedFrom = Date.now();
    expect((await server.request('GET', '/v1/regions', { key: created.key })).status).toBe(200);
    await apiKeys.flushLastUsed();
    const after = await server.request('GET', `/v1/account/api-keys/${created.id}`, { key: server.rootKey });
    const lastUsed = new Date(after.body.data.last_used_at).getTime();
    expect(lastUsed).toBeGreaterThanOrEqual(usedFrom - 1000);
    expect(lastUsed).toBeLessThanOrEqual(Date.now());
  });

  it('authenticates with Authorization: Bearer and with X-API-Key; other schemes and wrong keys get 401', async () => {
    const created = await createKey(server, server.rootKey);
    const bearer = await server.request('GET', '/v1/account', {
      headers: { authorization: `Bearer ${created.key}` },
    });
    expect(bearer.status).toBe(200);
    const apiKey = await server.request('GET', '/v1/account', { headers: { 'x-api-key': created.key } });
    expect(apiKey.status).toBe(200);
    expect(apiKey.body.data.id).toBe(bearer.body.data.id);

    const basic = Buffer.from(`user:${created.key}`).toString('base64');
    const cases: Record<string, string>[] = [
      { authorization: `Basic ${basic}` },
      { authorization: created.key },
      { authorization: 'Bearer' },
      { authorization: `Bearer ${created.key} extra` },
      { authorization: `Bearer nmb_${randomBytes(32).toString('hex')}` },
      { authorization: `Bearer ${created.key.slice(0, -1)}` },
      { 'x-api-key': `${created.key}x` },
      { 'x-api-key': 'not-a-key' },
    ];
    for (const headers of cases) {
      const reply = await server.request('GET', '/v1/account', { headers });
      expect(reply.status, JSON.stringify(headers)).toBe(401);
      expect(reply.body.error.code).toBe('authentication_failed');
      expect(reply.body.data).toBeUndefined();
    }
  });

  it('enforces the api_keys quota: 403 quota_exceeded with quota, limit, used, requested', async () => {
    const account = await server.createAccount({ plan: 'free' });
    await server.admin('set-quota', '--account', account.id, '--name', 'api_keys', '--limit', '2');
    await createKey(server, account.key); // the admin key is the first, this the second
    const third = await server.request('POST', '/v1/account/api-keys', {
      key: account.key,
      body: { name: 'one too many' },
    });
    expect(third.status).toBe(403);
    expect(third.body.error.code).toBe('quota_exceeded');
    expect(third.body.error.details).toEqual({ quota: 'api_keys', limit: 2, used: 2, requested: 1 });
    const listed = await server.request('GET', '/v1/account/api-keys', { key: account.key });
    expect(listed.body.pagination.total_items).toBe(2);
  });

  it('writes api_key.created and api_key.deleted events without the key', async () => {
    const created = await createKey(server, server.rootKey, { name: 'evented' });
    await server.request('DELETE', `/v1/account/api-keys/${created.id}`, { key: server.rootKey });
    const rootAccount = (await server.request('GET', '/v1/account', { key: server.rootKey })).body.data.id;
    const events = await server.running.backends.store.db
      .selectFrom('events')
      .selectAll()
      .where('resource_id', '=', created.id)
      .orderBy('seq')
      .execute();
    expect(events.map((e) => e.type)).toEqual(['api_key.created', 'api_key.deleted']);
    for (const event of events) {
      expect(event.account_id).toBe(rootAccount);
      expect(event.id).toMatch(/^evt_/);
      expect(JSON.parse(event.data)).toMatchObject({ api_key_id: created.id, name: 'evented' });
      expect(event.data).not.toContain(created.key);
    }
  });
});

describe('API keys in the SQLite file', () => {
  const server = serverForSuite({ store: 'sqlite' });

  it('the plain key is nowhere in the database file bytes (db, -wal, -shm)', async () => {
    const created = await createKey(server, server.rootKey);
    const idempotent = await createKey(
      server,
      server.rootKey,
      {},
      { 'idempotency-key': `bytes-${created.id}` },
    );
    expect((await server.request('GET', '/v1/account', { key: created.key })).status).toBe(200);
    await server.running.backends.services.apiKeys.flushLastUsed();

    const file = path.join(server.config.dataDir, 'nimbus.db');
    const reader = new SqliteDatabase(file, { readonly: true, fileMustExist: true });
    try {
      const columns = reader.prepare('select name from pragma_table_info(?)').all('api_keys') as {
        name: string;
      }[];
      expect(columns.map((c) => c.name).sort()).toEqual(
        [
          'account_id',
          'created_at',
          'expires_at',
          'id',
          'key_hash',
          'last_used_at',
          'name',
          'permissions',
          'prefix',
        ].sort(),
      );
      const row = reader.prepare('select * from api_keys where id = ?').get(created.id) as Record<
        string,
        unknown
      >;
      expect(row.key_hash).toBe(sha256(created.key));
      expect(row.last_used_at).not.toBeNull();
    } finally {
      reader.close();
    }

    const files = ['nimbus.db', 'nimbus.db-wal', 'nimbus.db-shm']
      .map((name) => path.join(server.config.dataDir, name))
      .filter((f) => existsSync(f));
    expect(files.length).toBeGreaterThan(1);
    const hashBytes = Buffer.from(sha256(created.key));
    expect(files.some((f) => readFileSync(f).includes(hashBytes))).toBe(true);
    for (const f of files) {
      const bytes = readFileSync(f);
      for (const k of [created.key, idempotent.key, server.rootKey]) {
        expect(bytes.includes(Buffer.from(k)), `${k.slice(0, 10)}… found in ${path.basename(f)}`).toBe(false);
      }
    }
  });
});

describe.each(STORES)('API key rotation warning (%s)', (store) => {
  const clock = new ManualClock(new Date());
  const server = serverForSuite({ store, clock });

  it('sends a Warning header recommending rotation on keys older than 90 days, none on fresh keys', async () => {
    const old = await createKey(server, server.rootKey);
    const fresh = await server.request('GET', '/v1/account', { key: old.key });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.warning).toBeUndefined();

    clock.advance(89 * DAY_MS);
    expect((await server.request('GET', '/v1/account', { key: old.key })).headers.warning).toBeUndefined();

    clock.advance(2 * DAY_MS);
    const aged = await server.request('GET', '/v1/account', { key: old.key });
    expect(aged.status).toBe(200);
    expect(aged.headers.warning).toMatch(/^299 /);
    expect(aged.headers.warning).toMatch(/rotat/i);
    expect(aged.headers.warning).toMatch(/90 days/);
    // Errors a key's own request causes still carry the advice.
    const denied = await server.request('GET', '/v1/account/api-keys/key_doesnotexist', { key: old.key });
    expect(denied.status).toBe(404);
    expect(denied.headers.warning).toMatch(/rotat/i);

    const replacement = await createKey(server, old.key);
    const now = await server.request('GET', '/v1/account', { key: replacement.key });
    expect(now.status).toBe(200);
    expect(now.headers.warning).toBeUndefined();
  });
});

describe.each(STORES)('logs never contain API keys (%s)', (store) => {
  const server = serverForSuite({ store });

  it('logs each request with its request id, and no key from Authorization or X-API-Key, valid or not', async () => {
    const created = await createKey(server, server.rootKey);
    const wrong = `nmb_${randomBytes(32).toString('hex').slice(0, 43)}`;
    const odd = `secret-${randomBytes(12).toString('hex')}`;
    const requestIds: string[] = [];
    const sent: [string, string, Record<string, string>][] = [
      ['GET', '/v1/account', { authorization: `Bearer ${created.key}` }],
      ['GET', '/v1/account', { 'x-api-key': created.key }],
      ['GET', '/v1/account', { authorization: `Bearer ${wrong}` }],
      ['GET', '/v1/account', { 'x-api-key': wrong }],
      ['GET', '/v1/account', { authorization: `Basic ${odd}` }],
      ['GET', '/v1/account', { 'x-api-key': odd }],
      ['GET', '/v1/nowhere', { authorization: `Bearer ${created.key}` }],
      ['POST', '/v1/account/api-keys', { 'x-api-key': created.key, 'content-type': 'application/json' }],
    ];
    for (const [method, url, headers] of sent) {
      const reply = await server.request(method, url, {
        headers,
        ...(method === 'POST' ? { rawBody: '{"name": ' } : {}),
      });
      expect(reply.headers['x-request-id']).toMatch(/^req_/);
      requestIds.push(String(reply.headers['x-request-id']));
    }
    // Plain HTTP with a key: refused, and the key must not be logged there either.
    const plain = await sendRequest(server.httpUrl!, null, 'GET', '/v1/account', { key: created.key });
    expect(plain.status).toBe(400);
    requestIds.push(String(plain.headers['x-request-id']));

    // The access line is written once the response has gone out: give the last ones a moment.
    await waitFor(
      'an access line for every request',
      () => (requestIds.every((id) => server.logs().includes(id)) ? true : undefined),
      { timeoutMs: 5_000, intervalMs: 20 },
    );
    const logs = server.logs();
    const lines = logs
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const requestLines = lines.filter((l) => l.msg === 'request');
    for (const id of requestIds) {
      expect(
        requestLines.find((l) => l.request_id === id),
        `log line for ${id}`,
      ).toBeDefined();
    }
    for (const secret of [created.key, wrong, odd, server.rootKey, created.key.slice(4)]) {
      expect(logs).not.toContain(secret);
    }
  });
});
