/**
 * One master key per store (issue 29, item 8): the store keeps the key's fingerprint, a process with
 * another key refuses to start and says why, PostgreSQL needs a configured key, and a secret that cannot
 * be opened is a clear answer, never a bare 500.
 *
 * Refusals are checked on `bin/nimbus serve` itself (a child process: what an operator sees on the
 * terminal and the exit code), so these suites need `npm run build`.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../src/platform/secret-box.js';
import { createPostgresDatabase, HAVE_POSTGRES, STORES } from './helpers/backends.js';
import { assertBuilt, spawnServer } from './helpers/child-server.js';
import { expectError, expectInvalid } from './helpers/common.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/** Tests that start `bin/nimbus` wait for a Node process to load, which takes seconds on a busy host. */
const SPAWNS = 120_000;
const newKey = () => randomBytes(32).toString('base64');
const tempDir = (prefix: string) => mkdtempSync(path.join(os.tmpdir(), prefix));

beforeAll(() => assertBuilt());

/** Starts `bin/nimbus serve` expecting it to refuse; returns what it wrote. */
async function refusal(options: Parameters<typeof spawnServer>[0]): Promise<string> {
  try {
    const started = await spawnServer(options);
    await started.stop();
  } catch (error) {
    const message = String((error as Error).message);
    expect(message).toMatch(/the server exited \(2\) before serving/);
    return message;
  }
  throw new Error('the server started');
}

describe.each(STORES)('the master key and the store (%s)', (store) => {
  let databaseUrl: string | undefined;
  let dropDatabase: (() => Promise<void>) | null = null;
  const dirs: string[] = [];
  const dir = () => {
    const made = tempDir('nimbus-master-key-');
    dirs.push(made);
    return made;
  };
  const firstKey = newKey();
  let firstDir: string;
  let first: TestServer;

  beforeAll(async () => {
    if (store === 'postgres') {
      const database = await createPostgresDatabase();
      databaseUrl = database.url;
      dropDatabase = database.drop;
    }
    firstDir = dir();
    first = await startFirst();
  });
  const startFirst = (key = firstKey) =>
    startTestServer({
      dataDir: firstDir,
      ...(databaseUrl ? { databaseUrl } : {}),
      // Webhook URLs are taken as written (no lookup: this machine has no DNS).
      env: { NIMBUS_SECRET_KEY: key, NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1' },
    });
  const fingerprintOf = (key: string) => SecretBox.fromKey(Buffer.from(key, 'base64')).fingerprint();
  const storedFingerprint = async () =>
    (
      await first.running.backends.store.db
        .selectFrom('settings')
        .select('value')
        .where('key', '=', 'master_key_fingerprint')
        .executeTakeFirst()
    )?.value;
  /** Restarts the first server with `key`, after the store was told to take the next key. */
  const resetTo = async (key: string) => {
    await first.running.backends.store.db
      .updateTable('settings')
      .set({ value: 'reset' })
      .where('key', '=', 'master_key_fingerprint')
      .execute();
    await first.close();
    first = await startFirst(key);
  };
  afterAll(async () => {
    await first?.close();
    await dropDatabase?.();
    for (const made of dirs) rmSync(made, { recursive: true, force: true });
  });

  /** The store is the first server's: its data dir on SQLite, its database on PostgreSQL. */
  const sameStore = () => (databaseUrl ? { dataDir: dir(), databaseUrl } : { dataDir: firstDir });

  it('keeps an HMAC of a fixed label under the key: neither the key nor a hash of it', async () => {
    const row = await first.running.backends.store.db
      .selectFrom('settings')
      .select('value')
      .where('key', '=', 'master_key_fingerprint')
      .executeTakeFirstOrThrow();
    const key = Buffer.from(firstKey, 'base64');
    expect(row.value).toBe(
      `v1:${createHmac('sha256', key).update('nimbus:master-key-fingerprint:v1').digest('base64url')}`,
    );
    for (const revealing of [
      firstKey,
      key.toString('hex'),
      key.toString('base64url'),
      createHash('sha256').update(key).digest('hex'),
      createHash('sha256').update(key).digest('base64url'),
    ]) {
      expect(row.value).not.toContain(revealing);
    }
  });

  it(
    'a second process with another key refuses to start, naming where its key came from',
    async () => {
      const otherKey = newKey();
      const output = await refusal({ ...sameStore(), env: { NIMBUS_SECRET_KEY: otherKey } });
      expect(output).toContain('Refusing to start: the master key from NIMBUS_SECRET_KEY is not the key');
      expect(output).toContain('NIMBUS_SECRET_KEY_FILE');
      expect(output).toContain('docs/operations.md');
      expect(output).not.toContain(otherKey);
      expect(output).not.toContain(firstKey);
    },
    SPAWNS,
  );

  it(
    'a key file with another key is named by its path',
    async () => {
      const keyFile = path.join(dir(), 'nimbus.key');
      const otherKey = newKey();
      writeFileSync(keyFile, `${otherKey}\n`, { mode: 0o600 });
      const output = await refusal({ ...sameStore(), env: { NIMBUS_SECRET_KEY_FILE: keyFile } });
      expect(output).toContain(`the master key from NIMBUS_SECRET_KEY_FILE (${keyFile}) is not the key`);
      expect(output).not.toContain(otherKey);
    },
    SPAWNS,
  );

  it(
    'the same key, from the variable or from a file, starts again and finds the same fingerprint',
    async () => {
      const keyFile = path.join(dir(), 'nimbus.key');
      writeFileSync(keyFile, `${firstKey}\n`, { mode: 0o600 });
      // A restart: one process at a time on a SQLite data dir.
      await first.close();
      try {
        const again = await spawnServer({
          ...sameStore(),
          env: { NIMBUS_SECRET_KEY_FILE: keyFile },
          startTimeoutMs: SPAWNS / 2,
        });
        try {
          expect((await again.request('GET', '/healthz')).status).toBe(200);
        } finally {
          await again.stop();
        }
      } finally {
        first = await startFirst();
      }
      const rows = await first.running.backends.store.db
        .selectFrom('settings')
        .select('value')
        .where('key', '=', 'master_key_fingerprint')
        .execute();
      expect(rows).toEqual([{ value: SecretBox.fromKey(Buffer.from(firstKey, 'base64')).fingerprint() }]);
    },
    SPAWNS,
  );

  it(
    'a store sealed before fingerprints takes the fingerprint only of a key that opens its secrets',
    async () => {
      const webhook = await first.request('POST', '/v1/webhooks', {
        key: first.rootKey,
        body: { url: 'https://hooks.example.com/nimbus', events: ['*'] },
      });
      expect(webhook.status, webhook.text).toBe(201);
      const db = first.running.backends.store.db;
      await db.deleteFrom('settings').where('key', '=', 'master_key_fingerprint').execute();
      try {
        const output = await refusal({ ...sameStore(), env: { NIMBUS_SECRET_KEY: newKey() } });
        expect(output).toContain('cannot open the secrets already sealed in this store');
        expect(output).toContain(webhook.body.data.id);
        const fingerprint = await db
          .selectFrom('settings')
          .select('value')
          .where('key', '=', 'master_key_fingerprint')
          .executeTakeFirst();
        expect(fingerprint).toBeUndefined();
      } finally {
        await db
          .insertInto('settings')
          .values({
            key: 'master_key_fingerprint',
            value: SecretBox.fromKey(Buffer.from(firstKey, 'base64')).fingerprint(),
          })
          .execute();
      }
    },
    SPAWNS,
  );

  it('a fingerprint set to "reset" takes the next key, however the secrets were sealed', async () => {
    const replacement = newKey();
    try {
      await resetTo(replacement);
      expect(await storedFingerprint()).toBe(fingerprintOf(replacement));
    } finally {
      await resetTo(firstKey);
    }
    expect(await storedFingerprint()).toBe(fingerprintOf(firstKey));
  });

  it('a webhook secret sealed under another key: the test delivery is a 409 saying so, not a bare 500', async () => {
    const created = await first.request('POST', '/v1/webhooks', {
      key: first.rootKey,
      body: { url: 'https://hooks.example.com/unreadable', events: ['*'] },
    });
    const id = created.body.data.id as string;
    const foreign = SecretBox.fromKey(randomBytes(32)).seal('whsec_sealed_under_another_key', id);
    await first.running.backends.store.db
      .updateTable('webhooks')
      .set({ secret: foreign })
      .where('id', '=', id)
      .execute();
    const test = await first.request('POST', `/v1/webhooks/${id}/test`, { key: first.rootKey });
    expectError(test, 409, 'conflict');
    expect(test.body.error.message).toMatch(/cannot be opened with this server's master key/);
    expect(test.body.error.message).toContain(`/v1/webhooks/${id}/rotate-secret`);
    expect(test.body.error.details).toMatchObject({ reason: 'secret_unreadable' });
    const delivery = await first.request(
      'GET',
      `/v1/webhooks/${id}/deliveries/${test.body.error.details.delivery_id}`,
      { key: first.rootKey },
    );
    expect(delivery.body.data).toMatchObject({ status: 'failed', attempts: 0 });
    expect(delivery.body.data.last_error).toMatch(/cannot be opened with this server's master key/);

    // Rotating seals a new secret under the server's key: deliveries are signed again.
    const rotated = await first.request('POST', `/v1/webhooks/${id}/rotate-secret`, { key: first.rootKey });
    expect(rotated.status, rotated.text).toBe(200);
    const again = await first.request('POST', `/v1/webhooks/${id}/test`, { key: first.rootKey });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.attempts).toBe(1);
  });
});

describe('PostgreSQL needs a configured master key', () => {
  const dataDir = tempDir('nimbus-master-key-pg-');
  let database: { url: string; drop: () => Promise<void> } | null = null;
  beforeAll(async () => {
    if (HAVE_POSTGRES) database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it.runIf(HAVE_POSTGRES)(
    'refuses to start without one, saying what to set, and makes no key file',
    async () => {
      const output = await refusal({
        dataDir,
        databaseUrl: database?.url as string,
        env: { NIMBUS_SECRET_KEY: '' },
      });
      expect(output).toContain('Refusing to start: NIMBUS_DATABASE_URL is PostgreSQL');
      expect(output).toContain('NIMBUS_SECRET_KEY (base64 of 32 random bytes');
      expect(output).toContain('NIMBUS_SECRET_KEY_FILE');
      expect(existsSync(path.join(dataDir, 'master.key'))).toBe(false);
    },
    SPAWNS,
  );

  it.runIf(HAVE_POSTGRES)(
    'a key file the data dir already has does not count, but the message names it',
    async () => {
      const keyFile = path.join(dataDir, 'master.key');
      writeFileSync(keyFile, newKey(), { mode: 0o600 });
      const output = await refusal({
        dataDir,
        databaseUrl: database?.url as string,
        env: { NIMBUS_SECRET_KEY: '' },
      });
      expect(output).toContain(`set NIMBUS_SECRET_KEY_FILE=${keyFile}`);
    },
    SPAWNS,
  );
});

describe('list cursors across keys', () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    const env = { NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1' };
    a = await startTestServer({ env: { ...env, NIMBUS_SECRET_KEY: newKey() } });
    b = await startTestServer({ env: { ...env, NIMBUS_SECRET_KEY: newKey() } });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('a /v2 cursor sealed under another key is a 400 naming cursor', async () => {
    for (const name of ['one', 'two']) {
      const made = await a.request('POST', '/v1/webhooks', {
        key: a.rootKey,
        body: { url: `https://hooks.example.com/${name}`, events: ['*'] },
      });
      expect(made.status, made.text).toBe(201);
    }
    const first = await a.request('GET', '/v2/webhooks?limit=1', { key: a.rootKey });
    expect(first.status, first.text).toBe(200);
    const cursor = encodeURIComponent(first.body.pagination.next_cursor as string);
    const same = await a.request('GET', `/v2/webhooks?limit=1&cursor=${cursor}`, { key: a.rootKey });
    expect(same.status, same.text).toBe(200);
    const other = await b.request('GET', `/v2/webhooks?limit=1&cursor=${cursor}`, { key: b.rootKey });
    expectInvalid(other, 'cursor');
    expect(other.body.error.message).toMatch(/another installation/);
  });
});
