/**
 * What one key may do to other keys (issue 20): it can grant neither permissions nor lifetime it does
 * not hold, it can revoke only keys holding no more than it does, and it can always revoke itself.
 * Plus the printable-name rule wherever a name is taken: API keys, PATCH /v1/account, admin
 * create-account.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid } from './helpers/common.js';
import { serverForSuite, type TestServer } from './helpers/server.js';

const HOUR_MS = 3600 * 1000;

async function mint(server: TestServer, key: string, body: Record<string, unknown>) {
  const reply = await server.request('POST', '/v1/account/api-keys', {
    key,
    body: { name: `k-${randomBytes(3).toString('hex')}`, ...body },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data as { id: string; key: string; expires_at: string | null; permissions: string[] };
}

/** Names no name field may hold, each with what makes it wrong. */
const BAD_NAMES: [string, string][] = [
  ['k\u001b[31m', 'ESC (a terminal escape)'],
  ['line\nbreak', 'a newline'],
  ['tab\there', 'a tab'],
  ['evil\u202Etxt.exe', 'U+202E right-to-left override'],
  ['zero\u200Bwidth', 'a zero-width space'],
  ['\u2028', 'a line separator'],
  [' padded', 'a leading space'],
  ['padded ', 'a trailing space'],
  ['del\u007f', 'DEL'],
  ['c1\u0085', 'a C1 control (NEL)'],
  ['tag\u{E0041}', 'a tag character outside the BMP'],
  ['lone\uD800', 'a lone surrogate'],
  ['x'.repeat(101), '101 characters'],
  ['', 'nothing'],
];

const GOOD_NAMES = [
  'ci deploy',
  'Ünïcødé 名前',
  'rocket 🚀',
  "O'Brien & Co. (EU)",
  'x'.repeat(100),
  '🚀'.repeat(100),
];

describe.each(STORES)('API key rules (%s)', (store) => {
  const server = serverForSuite({ store });

  describe('lifetime: a key cannot create a key that outlives it', () => {
    it('a key expiring in an hour cannot make a key that never expires or expires later', async () => {
      const { key } = await account(server);
      const soon = new Date(Date.now() + HOUR_MS);
      const shortLived = await mint(server, key, { expires_at: soon.toISOString() });

      for (const later of [new Date(soon.getTime() + 1000), new Date('2099-01-01T00:00:00Z')]) {
        const reply = await server.request('POST', '/v1/account/api-keys', {
          key: shortLived.key,
          body: { name: 'forever', expires_at: later.toISOString() },
        });
        const error = expectError(reply, 403, 'forbidden');
        expect(error.details).toMatchObject({
          expires_at: later.toISOString(),
          held_expires_at: soon.toISOString(),
        });
      }
    });

    it('without expires_at the new key inherits the creator expiry; an earlier or equal one is kept', async () => {
      const { key } = await account(server);
      const soon = new Date(Date.now() + HOUR_MS);
      const shortLived = await mint(server, key, { expires_at: soon.toISOString() });
      const inherited = await mint(server, shortLived.key, {});
      expect(inherited.expires_at).toBe(soon.toISOString());
      const same = await mint(server, shortLived.key, { expires_at: soon.toISOString() });
      expect(same.expires_at).toBe(soon.toISOString());
      const earlier = new Date(soon.getTime() - 60_000).toISOString();
      expect((await mint(server, shortLived.key, { expires_at: earlier })).expires_at).toBe(earlier);
    });

    it('a key that never expires may make keys with any expiry, or none', async () => {
      const { key } = await account(server);
      expect((await mint(server, key, {})).expires_at).toBeNull();
      const far = '2099-01-01T00:00:00.000Z';
      expect((await mint(server, key, { expires_at: far })).expires_at).toBe(far);
    });
  });

  describe('revocation: only keys holding no more than the revoker', () => {
    it('a key with account:write cannot delete a * key (the owner is not locked out)', async () => {
      const owner = await account(server);
      const manager = await mint(server, owner.key, { permissions: ['account:write'] });
      const keys = await server.request('GET', '/v1/account/api-keys', { key: owner.key });
      const admin = keys.body.data.find((k: { name: string }) => k.name === 'admin');
      const reply = await server.request('DELETE', `/v1/account/api-keys/${admin.id}`, { key: manager.key });
      const error = expectError(reply, 403, 'forbidden');
      expect(error.details).toMatchObject({ permissions: ['*'] });
      expect((await server.request('GET', '/v1/account', { key: owner.key })).status).toBe(200);
    });

    it('nor a key holding a permission it lacks; but one within its own permissions', async () => {
      const owner = await account(server);
      const manager = await mint(server, owner.key, { permissions: ['account:write', 'instances:read'] });
      const wider = await mint(server, owner.key, { permissions: ['instances:write'] });
      expectError(
        await server.request('DELETE', `/v1/account/api-keys/${wider.id}`, { key: manager.key }),
        403,
        'forbidden',
      );
      const narrower = await mint(server, owner.key, { permissions: ['instances:read', 'account:read'] });
      const deleted = await server.request('DELETE', `/v1/account/api-keys/${narrower.id}`, {
        key: manager.key,
      });
      expect(deleted.status, deleted.text).toBe(200);
      expect((await server.request('GET', '/v1/account', { key: narrower.key })).status).toBe(401);
    });

    it('any key may delete itself, a read-only one included; not another key without account:write', async () => {
      const owner = await account(server);
      const reader = await mint(server, owner.key, { permissions: ['instances:read'] });
      const other = await mint(server, owner.key, { permissions: ['instances:read'] });
      const refused = await server.request('DELETE', `/v1/account/api-keys/${other.id}`, { key: reader.key });
      expect(expectError(refused, 403, 'forbidden').message).toContain('account:write');
      const self = await server.request('DELETE', `/v1/account/api-keys/${reader.id}`, { key: reader.key });
      expect(self.status, self.text).toBe(200);
      expect(self.body.data.id).toBe(reader.id);
      expectError(
        await server.request('GET', '/v1/instances', { key: reader.key }),
        401,
        'authentication_failed',
      );
      // A made-up id is still refused for permission first, so ids cannot be probed without it.
      const probe = await server.request('DELETE', '/v1/account/api-keys/key_00000000000000000000000000', {
        key: other.key,
      });
      expectError(probe, 403, 'forbidden');
    });
  });

  describe('names are printable text everywhere a name is taken', () => {
    it.each(BAD_NAMES)('refuses %j (%s) for API keys and accounts', async (name) => {
      const { key } = await account(server);
      expectInvalid(await server.request('POST', '/v1/account/api-keys', { key, body: { name } }), 'name');
      expectInvalid(await server.request('PATCH', '/v1/account', { key, body: { name } }), 'name');
      expectInvalid(
        await server.request('PATCH', '/v1/account', { key, body: { company: name } }),
        'company',
      );
      await expect(
        server.admin(
          'create-account',
          '--email',
          `n${randomBytes(4).toString('hex')}@example.com`,
          '--name',
          name,
        ),
      ).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'name' } });
    });

    it('says what the rule is', async () => {
      const { key } = await account(server);
      const reply = await server.request('POST', '/v1/account/api-keys', { key, body: { name: 'a\u202Eb' } });
      expect(reply.body.error.message).toMatch(/^name must be 1 to 100 printable characters/);
    });

    it.each(GOOD_NAMES)('accepts %j and stores it unchanged', async (name) => {
      const { key } = await account(server);
      expect((await mint(server, key, { name })).id).toMatch(/^key_/);
      const patched = await server.request('PATCH', '/v1/account', { key, body: { name, company: name } });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body.data).toMatchObject({ name, company: name });
      const created = await server.admin<{ account_id: string }>(
        'create-account',
        '--email',
        `g${randomBytes(4).toString('hex')}@example.com`,
        '--name',
        name,
      );
      expect(created.account_id).toMatch(/^acct_/);
    });

    it('refuses control characters in e-mail addresses', async () => {
      const { key } = await account(server);
      expectInvalid(
        await server.request('PATCH', '/v1/account', { key, body: { email: 'a\u001b@example.com' } }),
        'email',
      );
    });
  });
});
