/**
 * Idempotency-Key on POST (docs/design.md, "Idempotency"), through HTTPS on both stores: replay with
 * Idempotent-Replayed, 422 for a key reused with another request, keys per account, the length limit,
 * exactly one effect under concurrent identical requests, and replay after a restart.
 *
 * The effect counted is the number of API keys with the request's name, read back through the list.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPostgresDatabase, STORES } from './helpers/backends.js';
import { waitFor } from './helpers/common.js';
import { type Reply, serverForSuite, startTestServer, type TestServer } from './helpers/server.js';

function newKey(): string {
  return `idem-${randomBytes(8).toString('hex')}`;
}

/** Names of all API keys of the account behind `key`. */
async function keyNames(server: TestServer, key: string): Promise<string[]> {
  const reply = await server.request('GET', '/v1/account/api-keys?limit=100', { key });
  expect(reply.status).toBe(200);
  return reply.body.data.map((k: { name: string }) => k.name);
}

/**
 * What a replay of a key creation returns: the stored answer minus the secret. The key is shown once;
 * the store never holds it (only its hash), so a replay names the same key without repeating it.
 */
function withoutSecret(body: { data: Record<string, unknown> }) {
  const { key: _secret, ...data } = body.data;
  return { ...body, data };
}

function createKey(server: TestServer, key: string, idempotencyKey: string, body: unknown): Promise<Reply> {
  return server.request('POST', '/v1/account/api-keys', {
    key,
    body,
    headers: { 'Idempotency-Key': idempotencyKey },
  });
}

describe.each(STORES)('Idempotency-Key (%s)', (store) => {
  // No GPU capacity anywhere: a GPU instance's create fails at its last statement (see the rollback case).
  const server = serverForSuite({ store, env: { NIMBUS_GPU_CAPACITY: 'us-east-1=0' } });

  it('replays the first answer for a repeated request, and the effect happens once', async () => {
    const account = await server.createAccount();
    const idempotencyKey = newKey();
    const body = { name: 'deploy-bot', permissions: ['instances:write'] };
    const first = await createKey(server, account.key, idempotencyKey, body);
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.body.data.key).toMatch(/^nmb_/);

    const second = await createKey(server, account.key, idempotencyKey, body);
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.headers['content-type']).toMatch(/^application\/json/);
    // The stored answer: the same key id and record, metadata included, but not the secret again.
    expect(second.body).toEqual(withoutSecret(first.body));
    expect(second.body.data.id).toBe(first.body.data.id);
    expect(second.body.data.prefix).toBe(first.body.data.key.slice(0, first.body.data.prefix.length));
    expect(second.body.data).not.toHaveProperty('key');
    expect(second.text).not.toContain(first.body.data.key);
    // A new request id for the new request, even though the body is the stored one.
    expect(second.headers['x-request-id']).not.toBe(first.headers['x-request-id']);

    expect((await keyNames(server, account.key)).filter((n) => n === 'deploy-bot')).toHaveLength(1);
    // The one key that exists is the one the first answer showed.
    const listed = await server.request('GET', `/v1/account/api-keys/${first.body.data.id}`, {
      key: account.key,
    });
    expect(listed.status).toBe(200);
    const viaKey = await server.request('GET', '/v1/account', { key: first.body.data.key });
    expect(viaKey.status).toBe(403); // instances:write only: a real key, refused account:read
    expect(viaKey.body.error.code).toBe('forbidden');
  });

  it('accepts the same key sent again with the same fields in another order', async () => {
    const account = await server.createAccount();
    const idempotencyKey = newKey();
    const first = await createKey(server, account.key, idempotencyKey, {
      name: 'ordered',
      permissions: ['*'],
    });
    expect(first.status).toBe(201);
    const again = await createKey(server, account.key, idempotencyKey, {
      permissions: ['*'],
      name: 'ordered',
    });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
  });

  it('refuses the same key with a different request: 422 idempotency_key_reused, nothing created', async () => {
    const account = await server.createAccount();
    const idempotencyKey = newKey();
    expect((await createKey(server, account.key, idempotencyKey, { name: 'first' })).status).toBe(201);
    const reused = await createKey(server, account.key, idempotencyKey, { name: 'second' });
    expect(reused.status).toBe(422);
    expect(reused.body).toMatchObject({ success: false, error: { code: 'idempotency_key_reused' } });
    expect(reused.headers['idempotent-replayed']).toBeUndefined();
    expect(await keyNames(server, account.key)).not.toContain('second');
    // The original is still replayable.
    const replay = await createKey(server, account.key, idempotencyKey, { name: 'first' });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it('keeps keys per account: another account may use the same key string', async () => {
    const alice = await server.createAccount();
    const bob = await server.createAccount();
    const idempotencyKey = newKey();
    const fromAlice = await createKey(server, alice.key, idempotencyKey, { name: 'shared-name' });
    const fromBob = await createKey(server, bob.key, idempotencyKey, { name: 'shared-name' });
    expect(fromAlice.status).toBe(201);
    expect(fromBob.status).toBe(201);
    expect(fromBob.headers['idempotent-replayed']).toBeUndefined();
    expect(fromBob.body.data.id).not.toBe(fromAlice.body.data.id);
    expect(fromBob.body.data.key).not.toBe(fromAlice.body.data.key);
    // Bob never receives Alice's secret, and a different body is no reuse for Bob either.
    const bobOther = await createKey(server, bob.key, newKey(), { name: 'other' });
    expect(bobOther.status).toBe(201);
    expect(await keyNames(server, alice.key)).toContain('shared-name');
    expect(await keyNames(server, bob.key)).toEqual(expect.arrayContaining(['shared-name', 'other']));
  });

  it('limits the key to 255 characters', async () => {
    const account = await server.createAccount();
    const tooLong = await createKey(server, account.key, 'k'.repeat(256), { name: 'too-long' });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.code).toBe('invalid_request');
    expect(tooLong.body.error.details.field).toBe('Idempotency-Key');
    expect(await keyNames(server, account.key)).not.toContain('too-long');

    const longest = `${'k'.repeat(250)}${randomBytes(3).toString('hex').slice(0, 5)}`;
    expect(longest).toHaveLength(255);
    expect((await createKey(server, account.key, longest, { name: 'longest' })).status).toBe(201);
    const replay = await createKey(server, account.key, longest, { name: 'longest' });
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it('does not keep a request that failed validation: the corrected retry runs', async () => {
    const account = await server.createAccount();
    const idempotencyKey = newKey();
    const invalid = await createKey(server, account.key, idempotencyKey, { name: '' });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.details.field).toBe('name');
    const corrected = await createKey(server, account.key, idempotencyKey, { name: 'corrected' });
    expect(corrected.status).toBe(201);
    expect(corrected.headers['idempotent-replayed']).toBeUndefined();
    expect(await keyNames(server, account.key)).toContain('corrected');
  });

  it('without the header, each POST is a new request', async () => {
    const account = await server.createAccount();
    for (let i = 0; i < 2; i += 1) {
      const reply = await server.request('POST', '/v1/account/api-keys', {
        key: account.key,
        body: { name: 'plain' },
      });
      expect(reply.status).toBe(201);
      expect(reply.headers['idempotent-replayed']).toBeUndefined();
    }
    expect((await keyNames(server, account.key)).filter((n) => n === 'plain')).toHaveLength(2);
  });

  for (const concurrent of [2, 10]) {
    it(`creates exactly one key when ${concurrent} identical keyed requests arrive at once`, async () => {
      const account = await server.createAccount();
      const idempotencyKey = newKey();
      const name = `concurrent-${concurrent}`;
      const replies = await Promise.all(
        Array.from({ length: concurrent }, () => createKey(server, account.key, idempotencyKey, { name })),
      );
      const originals = replies.filter(
        (r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined,
      );
      const replays = replies.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === 'true');
      const inUse = replies.filter((r) => r.status === 409);
      expect(originals).toHaveLength(1);
      expect(replays.length + inUse.length).toBe(concurrent - 1);
      // A replay arriving once the key was committed but before the first answer was saved is made from
      // the key as it is now (its own metadata); after that, it is the saved answer.
      for (const replay of replays) expect(replay.body.data).toEqual(withoutSecret(originals[0]?.body).data);
      for (const busy of inUse) {
        expect(busy.body).toMatchObject({ success: false, error: { code: 'idempotency_key_in_use' } });
      }
      expect((await keyNames(server, account.key)).filter((n) => n === name)).toHaveLength(1);
      // Once the first has finished, a retry is a replay of it.
      const later = await createKey(server, account.key, idempotencyKey, { name });
      expect(later.headers['idempotent-replayed']).toBe('true');
      expect(later.body.data.id).toBe(originals[0]?.body.data.id);
    });
  }

  // PostgreSQL only: creating a key locks the account row there, so the test can hold the first
  // request in the middle of its work by holding that lock itself.
  if (store === 'postgres')
    it('answers 409 idempotency_key_in_use while the first request runs', async () => {
      const account = await server.createAccount();
      const idempotencyKey = newKey();
      const blocker = new pg.Client({ connectionString: server.config.databaseUrl });
      await blocker.connect();
      try {
        await blocker.query('begin');
        await blocker.query('select id from accounts where id = $1 for update', [account.id]);
        const first = createKey(server, account.key, idempotencyKey, { name: 'held' });
        // Wait until the first request is queued behind our lock: it has claimed the key by then.
        await waitFor(
          'the first request to reach the account lock',
          async () => {
            const { rows } = await blocker.query(
              "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
            );
            return rows[0].n > 0 ? true : undefined;
          },
          { timeoutMs: 10_000, intervalMs: 20 },
        );
        const busy = await createKey(server, account.key, idempotencyKey, { name: 'held' });
        expect(busy.status).toBe(409);
        expect(busy.body).toMatchObject({ success: false, error: { code: 'idempotency_key_in_use' } });
        // A different request with the key is refused as reuse even while the first runs.
        const other = await createKey(server, account.key, idempotencyKey, { name: 'not-held' });
        expect(other.status).toBe(422);
        expect(other.body.error.code).toBe('idempotency_key_reused');

        await blocker.query('commit');
        const done = await first;
        expect(done.status).toBe(201);
        expect(done.headers['idempotent-replayed']).toBeUndefined();
        const replay = await createKey(server, account.key, idempotencyKey, { name: 'held' });
        expect(replay.status).toBe(201);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.body.data.id).toBe(done.body.data.id);
        expect((await keyNames(server, account.key)).filter((n) => n === 'held')).toHaveLength(1);
      } finally {
        await blocker.query('rollback').catch(() => {});
        await blocker.end();
      }
    });

  it('replays the creation of a key only to a key that could make it; others get the 403 of a fresh request', async () => {
    const account = await server.createAccount();
    const idempotencyKey = newKey();
    // No permissions named: the new key gets the caller's, `*`.
    const body = { name: 'made-by-star' };
    const first = await createKey(server, account.key, idempotencyKey, body);
    expect(first.status).toBe(201);
    expect(first.body.data.permissions).toEqual(['*']);
    const makeKey = async (extra: Record<string, unknown>) => {
      const made = await createKey(server, account.key, newKey(), { name: 'other', ...extra });
      expect(made.status, made.text).toBe(201);
      return made.body.data.key as string;
    };

    const writer = await makeKey({ permissions: ['account:write'] });
    const beyond = await createKey(server, writer, idempotencyKey, body);
    expect(beyond.status, beyond.text).toBe(403);
    expect(beyond.headers['idempotent-replayed']).toBeUndefined();
    expect(beyond.body.error).toMatchObject({
      code: 'forbidden',
      message: 'A key cannot grant permissions it does not hold',
      details: { permissions: ['*'], held: ['account:write'] },
    });
    expect(beyond.text).not.toContain(first.body.data.id);

    const shortLived = await makeKey({ expires_at: new Date(Date.now() + 3600_000).toISOString() });
    const outlives = await createKey(server, shortLived, idempotencyKey, body);
    expect(outlives.status, outlives.text).toBe(403);
    expect(outlives.body.error.message).toBe('A key cannot create a key that expires later than itself');

    // Without the route's permission it is the guard's 403, as for any request.
    const reader = await makeKey({ permissions: ['instances:write'] });
    const unpermitted = await createKey(server, reader, idempotencyKey, body);
    expect(unpermitted.status).toBe(403);
    expect(unpermitted.body.error.details).toEqual({ required_permission: 'account:write' });

    // Another key that could have made it gets the replay.
    const peer = await makeKey({});
    const replay = await createKey(server, peer, idempotencyKey, body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data.id).toBe(first.body.data.id);
    expect((await keyNames(server, account.key)).filter((n) => n === 'made-by-star')).toHaveLength(1);
  });

  it('a create that fails after recording its key rolls the record back: the retry runs again', async () => {
    const account = await server.createAccount({ plan: 'enterprise' });
    const idempotencyKey = newKey();
    // The GPU capacity is taken last in the create's transaction, after the key was marked as used.
    const body = {
      name: 'no-room',
      instance_type: 'gpu-1x',
      region: 'us-east-1',
      image: 'ubuntu-22.04-cuda',
    };
    for (const attempt of ['first', 'retry']) {
      const reply = await server.request('POST', '/v1/instances', {
        key: account.key,
        body,
        headers: { 'Idempotency-Key': idempotencyKey },
      });
      expect(reply.status, `${attempt}: ${reply.text}`).toBe(503);
      expect(reply.body.error.details).toMatchObject({ reason: 'insufficient_capacity' });
      expect(reply.headers['idempotent-replayed']).toBeUndefined();
    }
    const list = await server.request('GET', '/v1/instances', { key: account.key });
    expect(list.body.pagination.total_items).toBe(0);
  });

  it('replays after a restart of the server on the same data', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-idem-'));
    const database = store === 'postgres' ? await createPostgresDatabase() : null;
    const options = { store, dataDir, ...(database ? { databaseUrl: database.url } : {}) };
    try {
      const before = await startTestServer(options);
      let account: { id: string; key: string };
      let first: Reply;
      const idempotencyKey = newKey();
      try {
        account = await before.createAccount();
        first = await createKey(before, account.key, idempotencyKey, { name: 'survivor' });
        expect(first.status).toBe(201);
      } finally {
        await before.close();
      }
      const after = await startTestServer(options);
      try {
        const replay = await createKey(after, account.key, idempotencyKey, { name: 'survivor' });
        expect(replay.status).toBe(201);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.body).toEqual(withoutSecret(first.body));
        const reused = await createKey(after, account.key, idempotencyKey, { name: 'other' });
        expect(reused.status).toBe(422);
        expect((await keyNames(after, account.key)).filter((n) => n === 'survivor')).toHaveLength(1);
      } finally {
        await after.close();
      }
    } finally {
      await database?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
