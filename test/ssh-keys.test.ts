/**
 * SSH keys over HTTPS: upload of every supported type with the fingerprint ssh-keygen prints, refusal of
 * weak, malformed and private keys with the field named, one name and one key per account (409, also
 * under concurrent uploads), list/get/delete, other accounts' keys as 404, idempotent replays, events,
 * and resolving ids and names for instance create.
 */
import { execFileSync } from 'node:child_process';
import { createHash, generateKeyPair, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidRequest } from '../src/platform/errors.js';
import { formatSshPublicKey, SSH_KEY_TYPES } from '../src/resources/ssh-keys/rules.js';
import type { SshKeyView } from '../src/resources/ssh-keys/view.js';
import { STORES } from './helpers/backends.js';
import { serverForSuite, type TestServer } from './helpers/server.js';

type Kind = 'ed25519' | 'rsa' | 'ec';

/** Ed25519 and EC keys take microseconds to make, so they are made inline. */
function publicKey(kind: Exclude<Kind, 'rsa'>, curve?: string, comment?: string): string {
  const pair =
    kind === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : generateKeyPairSync('ec', { namedCurve: curve as string });
  return formatSshPublicKey(pair.publicKey, comment);
}

const generateRsaKeyPair = promisify(generateKeyPair);

/**
 * RSA keys are made on the thread pool. A 4096-bit key can take seconds on a slow host; making it on
 * this thread would stall the in-process server too, whose keep-alive timer then closes the pooled
 * socket just as the next request is written to it (ECONNRESET).
 */
async function rsaPublicKey(bits: number, comment?: string): Promise<string> {
  const pair = await generateRsaKeyPair('rsa', { modulusLength: bits });
  return formatSshPublicKey(pair.publicKey, comment);
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-sshkeys-it-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;

/** What `ssh-keygen -lf` prints for the key, or (without ssh-keygen) the same digest computed here. */
function expectedFingerprint(line: string): string {
  try {
    const file = path.join(dir, `k${++fileCounter}.pub`);
    writeFileSync(file, `${line}\n`);
    return execFileSync('ssh-keygen', ['-lf', file], { encoding: 'utf8' }).split(' ')[1] as string;
  } catch (error) {
    if ((error as { code?: string }).code !== 'ENOENT') throw error;
    const blob = Buffer.from(line.split(' ')[1] as string, 'base64');
    return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
  }
}

const uniqueName = (prefix = 'key') => `${prefix}-${randomBytes(3).toString('hex')}`;

async function upload(server: TestServer, key: string, body: Record<string, unknown>): Promise<SshKeyView> {
  const reply = await server.request('POST', '/v1/ssh-keys', { key, body });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data as SshKeyView;
}

describe.each(STORES)('SSH keys (%s)', (store) => {
  const server = serverForSuite({ store });

  it.each([
    ['ed25519', 'ed25519', undefined, 'ssh-ed25519'],
    ['rsa 2048', 'rsa', 2048, 'ssh-rsa'],
    ['rsa 4096', 'rsa', 4096, 'ssh-rsa'],
    ['ecdsa P-256', 'ec', 'P-256', 'ecdsa-sha2-nistp256'],
    ['ecdsa P-384', 'ec', 'P-384', 'ecdsa-sha2-nistp384'],
    ['ecdsa P-521', 'ec', 'P-521', 'ecdsa-sha2-nistp521'],
  ] as const)(
    'uploads a %s key (201) with the fingerprint ssh-keygen prints',
    async (_label, kind, option, type) => {
      const line =
        kind === 'rsa'
          ? await rsaPublicKey(option as number, 'me@laptop')
          : publicKey(kind, option as string | undefined, 'me@laptop');
      const name = uniqueName(kind);
      const reply = await server.request('POST', '/v1/ssh-keys', {
        key: server.rootKey,
        body: { name, public_key: `  ${line.replace(' ', '   ')}\n` },
      });
      expect(reply.status, reply.text).toBe(201);
      const created = reply.body.data as SshKeyView;
      expect(Object.keys(created).sort()).toEqual(['created_at', 'fingerprint', 'id', 'name', 'public_key']);
      expect(created.id).toMatch(/^sshk_[0-9a-z]{26}$/);
      expect(created.name).toBe(name);
      expect(created.public_key).toBe(line);
      expect(created.public_key.startsWith(`${type} `)).toBe(true);
      expect(created.fingerprint).toBe(expectedFingerprint(line));
      expect(new Date(created.created_at).toISOString()).toBe(created.created_at);

      const one = await server.request('GET', `/v1/ssh-keys/${created.id}`, { key: server.rootKey });
      expect(one.status).toBe(200);
      expect(one.body.data).toEqual(created);
    },
  );

  it('accepts a key made by ssh-keygen, fingerprint as fixed when it was made', async () => {
    const line =
      'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRb9olYCpSGsNwvNt3+sWeG618K2x4QXKOmIIiBqnY7 fixed@vector';
    const account = await server.createAccount();
    const created = await upload(server, account.key, { name: 'fixed', public_key: line });
    expect(created.fingerprint).toBe('SHA256:l6pQwjcATXhCFFmAUG0C8yStHDiD+suttIYG5Y4O70Y');
  });

  it('refuses RSA keys under 2048 bits, saying how many bits the key has', async () => {
    const reply = await server.request('POST', '/v1/ssh-keys', {
      key: server.rootKey,
      body: { name: uniqueName(), public_key: await rsaPublicKey(1024) },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error.code).toBe('invalid_request');
    expect(reply.body.error.message).toContain('RSA keys must be at least 2048 bits; this one has 1024');
    expect(reply.body.error.details).toEqual({ field: 'public_key' });
  });

  it('refuses malformed keys with 400 naming public_key', async () => {
    const ed = publicKey('ed25519');
    const edBlob = Buffer.from(ed.split(' ')[1] as string, 'base64');
    const cases: Array<[string, string, RegExp]> = [
      ['garbage', 'this is not a key', /Unsupported key type/],
      ['not base64', 'ssh-ed25519 %%%% me', /not valid base64/],
      [
        'wrong inner type',
        `ssh-rsa ${edBlob.toString('base64')}`,
        /of type "ssh-ed25519" but the line says ssh-rsa/,
      ],
      ['truncated', `ssh-ed25519 ${edBlob.subarray(0, 40).toString('base64')}`, /truncated/],
      [
        'trailing bytes',
        `ssh-ed25519 ${Buffer.concat([edBlob, Buffer.of(1, 2)]).toString('base64')}`,
        /unexpected/,
      ],
      [
        'private key',
        '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n',
        /private key/,
      ],
      ['two lines', `${ed}\n${publicKey('ed25519')}`, /single line/],
    ];
    for (const [label, public_key, message] of cases) {
      const reply = await server.request('POST', '/v1/ssh-keys', {
        key: server.rootKey,
        body: { name: uniqueName(), public_key },
      });
      expect(reply.status, label).toBe(400);
      expect(reply.body.error.code, label).toBe('invalid_request');
      expect(reply.body.error.message, label).toMatch(message);
      expect(reply.body.error.details.field, label).toBe('public_key');
      // Never echoed: it might be a private key.
      expect(reply.text, label).not.toContain('b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ');
    }
  });

  it('refuses unsupported types (ssh-dss), listing the allowed ones', async () => {
    const reply = await server.request('POST', '/v1/ssh-keys', {
      key: server.rootKey,
      body: { name: uniqueName(), public_key: 'ssh-dss AAAAB3NzaC1kc3MAAACBAPLq me@old' },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error.message).toContain('Unsupported key type "ssh-dss"');
    expect(reply.body.error.details).toEqual({ field: 'public_key', allowed_values: [...SSH_KEY_TYPES] });
  });

  it('validates the body: name pattern and length, unknown fields, missing public_key', async () => {
    const key = publicKey('ed25519');
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ name: 'has space', public_key: key }, 'name'],
      [{ name: 'x'.repeat(65), public_key: key }, 'name'],
      [{ name: '', public_key: key }, 'name'],
      [{ name: 'sshk_lookalike', public_key: key }, 'name'],
      [{ name: 'ok', public_key: key, extra: 1 }, 'extra'],
      [{ name: 'ok' }, 'public_key'],
      [{ name: 'ok', public_key: 42 }, 'public_key'],
    ];
    for (const [body, field] of bad) {
      const reply = await server.request('POST', '/v1/ssh-keys', { key: server.rootKey, body });
      expect(reply.status, JSON.stringify(body)).toBe(400);
      expect(reply.body.error.details.field, JSON.stringify(body)).toBe(field);
    }
    expect((await upload(server, server.rootKey, { name: 'A-z_0.9', public_key: key })).name).toBe('A-z_0.9');
  });

  it('a second key with the same name is 409 conflict naming the existing key', async () => {
    const account = await server.createAccount();
    const first = await upload(server, account.key, { name: 'laptop', public_key: publicKey('ed25519') });
    const reply = await server.request('POST', '/v1/ssh-keys', {
      key: account.key,
      body: { name: 'laptop', public_key: publicKey('ed25519') },
    });
    expect(reply.status).toBe(409);
    expect(reply.body.error.code).toBe('conflict');
    expect(reply.body.error.message).toContain(first.id);
    expect(reply.body.error.details).toMatchObject({ field: 'name', value: 'laptop', ssh_key_id: first.id });
    // The same name in another account is fine.
    const other = await server.createAccount();
    await upload(server, other.key, { name: 'laptop', public_key: publicKey('ed25519') });
  });

  it('the same key twice (even with another comment) is 409 conflict naming the existing key', async () => {
    const account = await server.createAccount();
    const line = publicKey('ec', 'P-256', 'first');
    const first = await upload(server, account.key, { name: 'one', public_key: line });
    const reply = await server.request('POST', '/v1/ssh-keys', {
      key: account.key,
      body: { name: 'two', public_key: line.replace(' first', ' second comment') },
    });
    expect(reply.status).toBe(409);
    expect(reply.body.error.code).toBe('conflict');
    expect(reply.body.error.message).toContain(first.id);
    expect(reply.body.error.details).toMatchObject({
      field: 'public_key',
      ssh_key_id: first.id,
      fingerprint: first.fingerprint,
    });
    // Another account may upload the same key.
    const other = await server.createAccount();
    expect((await upload(server, other.key, { name: 'one', public_key: line })).fingerprint).toBe(
      first.fingerprint,
    );
  });

  it('concurrent uploads of one name or one key: one 201, the rest 409, never 500', async () => {
    const account = await server.createAccount();
    const sameName = await Promise.all(
      Array.from({ length: 6 }, () =>
        server.request('POST', '/v1/ssh-keys', {
          key: account.key,
          body: { name: 'race', public_key: publicKey('ed25519') },
        }),
      ),
    );
    expect(sameName.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    const line = publicKey('ed25519');
    const sameKey = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        server.request('POST', '/v1/ssh-keys', {
          key: account.key,
          body: { name: `race-${i}`, public_key: line },
        }),
      ),
    );
    expect(sameKey.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    for (const reply of [...sameName, ...sameKey].filter((r) => r.status === 409)) {
      expect(reply.body.error.code).toBe('conflict');
    }
    const listed = await server.request('GET', '/v1/ssh-keys', { key: account.key });
    expect(listed.body.pagination.total_items).toBe(2);
  });

  it('lists keys page by page, sorted, filtered by exact name', async () => {
    const account = await server.createAccount();
    const names = ['delta', 'alpha', 'charlie', 'bravo', 'echo'];
    const created: SshKeyView[] = [];
    for (const name of names)
      created.push(await upload(server, account.key, { name, public_key: publicKey('ed25519') }));

    const first = await server.request('GET', '/v1/ssh-keys?limit=2&sort=name&order=asc', {
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
    expect(first.body.data.map((k: SshKeyView) => k.name)).toEqual(['alpha', 'bravo']);
    const last = await server.request('GET', '/v1/ssh-keys?limit=2&page=3&sort=name&order=asc', {
      key: account.key,
    });
    expect(last.body.pagination).toMatchObject({ page: 3, has_next: false, has_prev: true });
    expect(last.body.data.map((k: SshKeyView) => k.name)).toEqual(['echo']);

    // Default: newest first, id breaking ties between keys made in the same millisecond.
    const newestFirst = [...created]
      .sort((x, y) =>
        x.created_at === y.created_at ? x.id.localeCompare(y.id) : x.created_at < y.created_at ? -1 : 1,
      )
      .reverse();
    const byDefault = await server.request('GET', '/v1/ssh-keys', { key: account.key });
    expect(byDefault.body.data.map((k: SshKeyView) => k.id)).toEqual(newestFirst.map((k) => k.id));
    const oldest = await server.request('GET', '/v1/ssh-keys?sort=created_at&order=asc&limit=1', {
      key: account.key,
    });
    expect(oldest.body.data.map((k: SshKeyView) => k.id)).toEqual([newestFirst[4]?.id]);

    const filtered = await server.request('GET', '/v1/ssh-keys?name=charlie', { key: account.key });
    expect(filtered.body.data).toEqual([created[2]]);
    expect(filtered.body.pagination.total_items).toBe(1);
    const none = await server.request('GET', '/v1/ssh-keys?name=charli', { key: account.key });
    expect(none.body.data).toEqual([]);

    const badSort = await server.request('GET', '/v1/ssh-keys?sort=fingerprint', { key: account.key });
    expect(badSort.status).toBe(400);
    expect(badSort.body.error.details).toMatchObject({
      field: 'sort',
      allowed_values: ['created_at', 'name'],
    });
  });

  it('deletes a key (200 with the record), then it is 404 on GET and DELETE', async () => {
    const account = await server.createAccount();
    const created = await upload(server, account.key, { name: 'gone', public_key: publicKey('ed25519') });
    const deleted = await server.request('DELETE', `/v1/ssh-keys/${created.id}`, { key: account.key });
    expect(deleted.status).toBe(200);
    expect(deleted.body.data).toEqual(created);
    for (const method of ['GET', 'DELETE']) {
      const reply = await server.request(method, `/v1/ssh-keys/${created.id}`, { key: account.key });
      expect(reply.status).toBe(404);
      expect(reply.body.error.code).toBe('not_found');
    }
    // The name and the key are free again.
    await upload(server, account.key, { name: 'gone', public_key: created.public_key });
  });

  it("another account's key is 404 on GET and DELETE, and absent from its list", async () => {
    const owner = await server.createAccount();
    const stranger = await server.createAccount();
    const created = await upload(server, owner.key, { name: 'private', public_key: publicKey('ed25519') });
    for (const method of ['GET', 'DELETE']) {
      const reply = await server.request(method, `/v1/ssh-keys/${created.id}`, { key: stranger.key });
      expect(reply.status, method).toBe(404);
      expect(reply.body.error.code).toBe('not_found');
    }
    const listed = await server.request('GET', '/v1/ssh-keys', { key: stranger.key });
    expect(listed.body.data).toEqual([]);
    expect((await server.request('GET', `/v1/ssh-keys/${created.id}`, { key: owner.key })).status).toBe(200);
  });

  it('needs instances:write to upload or delete, instances:read to read', async () => {
    const account = await server.createAccount();
    const minted = await server.request('POST', '/v1/account/api-keys', {
      key: account.key,
      body: { name: 'reader', permissions: ['instances:read'] },
    });
    const reader = minted.body.data.key as string;
    const created = await upload(server, account.key, { name: 'k', public_key: publicKey('ed25519') });
    expect((await server.request('GET', '/v1/ssh-keys', { key: reader })).status).toBe(200);
    expect((await server.request('GET', `/v1/ssh-keys/${created.id}`, { key: reader })).status).toBe(200);
    const post = await server.request('POST', '/v1/ssh-keys', {
      key: reader,
      body: { name: 'n', public_key: publicKey('ed25519') },
    });
    expect(post.status).toBe(403);
    expect((await server.request('DELETE', `/v1/ssh-keys/${created.id}`, { key: reader })).status).toBe(403);
  });

  it('an Idempotency-Key replay returns the first response and makes no second key', async () => {
    const account = await server.createAccount();
    const headers = { 'idempotency-key': `ssh-${randomBytes(4).toString('hex')}` };
    const body = { name: 'once', public_key: publicKey('ed25519') };
    const first = await server.request('POST', '/v1/ssh-keys', { key: account.key, body, headers });
    expect(first.status).toBe(201);
    const replay = await server.request('POST', '/v1/ssh-keys', { key: account.key, body, headers });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data).toEqual(first.body.data);
    const listed = await server.request('GET', '/v1/ssh-keys', { key: account.key });
    expect(listed.body.pagination.total_items).toBe(1);
  });

  it('writes ssh_key.created and ssh_key.deleted events', async () => {
    const account = await server.createAccount();
    const created = await upload(server, account.key, { name: 'evented', public_key: publicKey('ed25519') });
    await server.request('DELETE', `/v1/ssh-keys/${created.id}`, { key: account.key });
    const events = await server.running.backends.store.db
      .selectFrom('events')
      .selectAll()
      .where('resource_id', '=', created.id)
      .orderBy('seq')
      .execute();
    expect(events.map((e) => e.type)).toEqual(['ssh_key.created', 'ssh_key.deleted']);
    for (const event of events) {
      expect(event.account_id).toBe(account.id);
      expect(JSON.parse(event.data)).toEqual({
        ssh_key_id: created.id,
        name: 'evented',
        fingerprint: created.fingerprint,
      });
    }
  });

  it('resolve: ids and names in the order given, deduplicated; unknown or foreign refs are invalid_request', async () => {
    const account = await server.createAccount();
    const other = await server.createAccount();
    const a = await upload(server, account.key, { name: 'a', public_key: publicKey('ed25519') });
    const b = await upload(server, account.key, { name: 'b', public_key: publicKey('ed25519') });
    const c = await upload(server, account.key, { name: 'c', public_key: publicKey('ed25519') });
    const foreign = await upload(server, other.key, { name: 'foreign', public_key: publicKey('ed25519') });
    const { services, store: backendStore } = server.running.backends;
    const resolve = (refs: string[]) => services.sshKeys.resolve(backendStore.db, account.id, refs);

    expect(await resolve([])).toEqual([]);
    expect(await resolve(['c', a.id, 'b', c.id, 'a'])).toEqual([c.id, a.id, b.id]);
    for (const ref of ['nope', foreign.id, 'foreign']) {
      const error = await resolve(['a', ref]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidRequest);
      expect((error as InvalidRequest).details).toEqual({ field: 'ssh_keys', value: ref });
      expect((error as InvalidRequest).message).toContain(ref);
    }
    // Inside a transaction too, as instance create calls it.
    const inTrx = await backendStore.db
      .transaction()
      .execute((trx) => services.sshKeys.resolve(trx, account.id, [b.id]));
    expect(inTrx).toEqual([b.id]);
  });
});
