/**
 * The operator commands (docs/design.md, "Entry point and operator commands") through the real entry point:
 * `bin/nimbus admin …` as a child process against a temporary data dir (SQLite) or a fresh PostgreSQL
 * database, then a server on the same store to show the changes are the ones the API applies. Also the first
 * start: the bootstrap account and its key file.
 */
import { execFile, execSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { databaseEnv, STORES, storeForSuite } from './helpers/backends.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = path.join(ROOT, 'bin', 'nimbus');
const BUILT_ENTRY = path.join(ROOT, 'dist', 'cli', 'main.js');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
      newest = Math.max(newest, statSync(full).mtimeMs);
    }
  }
  return newest;
}

/** `npm test` builds first (pretest); a direct `vitest run` may find dist/ missing or older than src/. */
function ensureBuilt(): void {
  if (existsSync(BUILT_ENTRY) && statSync(BUILT_ENTRY).mtimeMs >= newestMtime(path.join(ROOT, 'src'))) return;
  try {
    execSync('npm run build', { cwd: ROOT, stdio: 'pipe' });
  } catch (error) {
    // tsc still emits on type errors (the typecheck step reports those); only a missing build is fatal.
    if (!existsSync(BUILT_ENTRY)) throw error;
  }
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment of an operator's shell, minus any NIMBUS_* settings of the test runner itself. */
function cliEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('NIMBUS_')));
  return { ...env, ...extra };
}

function nimbus(env: Record<string, string>, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: cliEnv(env), cwd: ROOT, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Runs a command with --json, expects success, and returns the one JSON document it printed. */
async function json<T = any>(env: Record<string, string>, ...args: string[]): Promise<T> {
  const run = await nimbus(env, 'admin', ...args, '--json');
  expect(run.stderr, `${args.join(' ')}: ${run.stderr}`).toBe('');
  expect(run.code).toBe(0);
  const lines = run.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!) as T;
}

interface AccountListing {
  accounts: { id: string; email: string; name: string; plan: string; status: string }[];
}

beforeAll(() => {
  ensureBuilt();
}, 180_000);

describe.each(STORES)('bin/nimbus admin (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-cli-' });
  const { dataDir } = suite;
  const env: Record<string, string> = { NIMBUS_DATA_DIR: dataDir };
  let account: { account_id: string; api_key: string; accounts_sharing_email: string[] };
  const email = `ops-${Date.now()}@example.net`;

  beforeAll(() => {
    Object.assign(env, databaseEnv(suite.databaseUrl));
  });

  it('migrate --json applies the schema to an empty store, then finds nothing to do', async () => {
    const first = await json<{ applied: string[] }>(env, 'migrate');
    expect(first.applied.length).toBeGreaterThan(0);
    expect(first.applied[0]).toMatch(/^0001_/);
    if (store === 'sqlite') expect(existsSync(path.join(dataDir, 'nimbus.db'))).toBe(true);
    expect(await json(env, 'migrate')).toEqual({ applied: [] });
    const text = await nimbus(env, 'admin', 'migrate');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/up to date/);
  });

  it('create-account --json prints {account_id, api_key}; list-accounts shows the account', async () => {
    account = await json(
      env,
      'create-account',
      '--email',
      email,
      '--plan',
      'professional',
      '--name',
      'Ops Team',
    );
    expect(Object.keys(account).sort()).toEqual(['account_id', 'accounts_sharing_email', 'api_key']);
    expect(account.accounts_sharing_email).toEqual([]);
    expect(account.account_id).toMatch(/^acct_/);
    expect(account.api_key).toMatch(/^nmb_[0-9A-Za-z]{43}$/);

    const listing = await json<AccountListing>(env, 'list-accounts');
    const listed = listing.accounts.find((a) => a.id === account.account_id);
    expect(listed).toMatchObject({ email, name: 'Ops Team', plan: 'professional', status: 'active' });
    // The key is shown once, at creation: never in a listing.
    expect(JSON.stringify(listing)).not.toContain(account.api_key);

    // Without --plan the account is on the free plan, without --name it is named after the address.
    const plain = await json<{ account_id: string }>(env, 'create-account', '--email', `free-${email}`);
    const free = (await json<AccountListing>(env, 'list-accounts')).accounts.find(
      (a) => a.id === plain.account_id,
    );
    expect(free).toMatchObject({ plan: 'free', name: `free-${email.split('@')[0]}` });

    // Without --json the key is still printed once, as text.
    const text = await nimbus(env, 'admin', 'create-account', '--email', `text-${email}`);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/API key \(shown once\): nmb_[0-9A-Za-z]{43}/);

    // An address is a contact, not an identity: one in use makes an account all the same, and the
    // operator is told which accounts use it.
    const shared = await nimbus(env, 'admin', 'create-account', '--email', email.toUpperCase());
    expect(shared.code, shared.stderr).toBe(0);
    expect(shared.stdout).toContain(`Note: ${account.account_id} already uses this e-mail address`);
  });

  it('set-plan, set-quota, set-rate-limit and set-account-status print JSON; list-accounts reflects them', async () => {
    const id = account.account_id;
    expect(await json(env, 'set-plan', '--account', id, '--plan', 'enterprise')).toEqual({
      account_id: id,
      plan: 'enterprise',
    });
    expect(await json(env, 'set-quota', '--account', id, '--name', 'instances', '--limit', '7')).toEqual({
      account_id: id,
      name: 'instances',
      limit: 7,
    });
    expect(await json(env, 'set-rate-limit', '--account', id, '--per-hour', '1234', '--burst', '77')).toEqual(
      {
        account_id: id,
        per_hour: 1234,
        burst: 77,
      },
    );
    expect(await json(env, 'set-account-status', '--account', id, '--status', 'past_due')).toEqual({
      account_id: id,
      status: 'past_due',
    });
    const listed = (await json<AccountListing>(env, 'list-accounts')).accounts.find((a) => a.id === id);
    expect(listed).toMatchObject({ plan: 'enterprise', status: 'past_due' });
  });

  it('the API serves what the commands set, and sees commands run while it is up', async () => {
    // The store already has accounts, so this server creates no bootstrap account; the harness reads
    // its "root" key from the bootstrap file, so hand it the key the CLI printed.
    writeFileSync(path.join(dataDir, 'bootstrap-api-key'), `${account.api_key}\n`, { mode: 0o600 });
    const server: TestServer = await startTestServer({
      dataDir,
      ...(env.NIMBUS_DATABASE_URL ? { databaseUrl: env.NIMBUS_DATABASE_URL } : {}),
      env: { NIMBUS_AUTH_CACHE_SECONDS: '0' },
    });
    try {
      const key = account.api_key;
      const me = await server.request('GET', '/v1/account', { key });
      expect(me.status).toBe(200);
      expect(me.body.data).toMatchObject({
        id: account.account_id,
        email,
        plan: 'enterprise',
        status: 'past_due',
      });
      const quota = await server.request('GET', '/v1/account/quota', { key });
      const byName = Object.fromEntries(quota.body.data.map((q: { name: string }) => [q.name, q]));
      expect(byName.instances).toMatchObject({ limit: 7 });
      expect(byName.vcpus).toMatchObject({ limit: 4096 });
      const limits = await server.request('GET', '/v1/account/rate-limit', { key });
      expect(limits.body.data).toMatchObject({ limit: 1234, burst: 77 });
      expect(limits.headers['x-ratelimit-limit']).toBe('1234');
      const keys = await server.request('GET', '/v1/account/api-keys', { key });
      expect(keys.body.data).toEqual([expect.objectContaining({ name: 'admin', permissions: ['*'] })]);

      // An operator suspends the account while the server runs: the next request is refused.
      await json(env, 'set-account-status', '--account', account.account_id, '--status', 'suspended');
      const suspended = await server.request('GET', '/v1/account', { key });
      expect(suspended.status).toBe(403);
      expect(suspended.body.error.code).toBe('forbidden');
      await json(env, 'set-account-status', '--account', account.account_id, '--status', 'active');
      expect((await server.request('GET', '/v1/account', { key })).status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('bad input exits non-zero with a message on stderr and nothing on stdout', async () => {
    const id = account.account_id;
    const before = await json<AccountListing>(env, 'list-accounts');
    const cases: { args: string[]; code: number; stderr: RegExp; field?: string }[] = [
      {
        args: ['create-account', '--email', `p-${email}`, '--plan', 'platinum'],
        code: 1,
        stderr: /plan/,
        field: 'plan',
      },
      { args: ['create-account', '--email', 'not-an-email'], code: 1, stderr: /e-mail/, field: 'email' },
      { args: ['create-account', '--plan', 'free'], code: 2, stderr: /--email is required/ },
      { args: ['create-account', '--email', `x-${email}`, '--colour', 'blue'], code: 2, stderr: /colour/ },
      { args: ['frobnicate'], code: 2, stderr: /Unknown admin command "frobnicate"/ },
      {
        args: ['set-plan', '--account', 'acct_doesnotexist', '--plan', 'free'],
        code: 1,
        stderr: /not_found/,
      },
      { args: ['set-plan', '--account', id, '--plan', 'gold'], code: 1, stderr: /plan/, field: 'plan' },
      { args: ['set-plan', '--plan', 'free'], code: 2, stderr: /--account is required/ },
      {
        args: ['set-quota', '--account', id, '--name', 'cpus', '--limit', '3'],
        code: 1,
        stderr: /name/,
        field: 'name',
      },
      {
        args: ['set-quota', '--account', id, '--name', 'instances', '--limit', 'lots'],
        code: 2,
        stderr: /whole number/,
      },
      {
        args: ['set-rate-limit', '--account', id, '--per-hour', '0', '--burst', '5'],
        code: 1,
        stderr: /per_hour/,
      },
      {
        args: ['set-rate-limit', '--account', id, '--per-hour', '100'],
        code: 2,
        stderr: /--burst is required/,
      },
      {
        args: ['set-account-status', '--account', id, '--status', 'deleted'],
        code: 1,
        stderr: /status/,
        field: 'status',
      },
    ];
    // Independent processes, each about a second of CPU to start: three side by side, so that thirteen
    // of them finish well inside the test's time on a busy two-core machine.
    const runs: Run[] = [];
    for (let i = 0; i < cases.length; i += 3) {
      const batch = cases.slice(i, i + 3);
      runs.push(...(await Promise.all(batch.map((c) => nimbus(env, 'admin', ...c.args, '--json')))));
    }
    for (const [i, c] of cases.entries()) {
      const run = runs[i]!;
      expect(run.code, `${c.args.join(' ')} → ${run.stderr}`).toBe(c.code);
      expect(run.stderr).toMatch(c.stderr);
      expect(run.stdout).toBe('');
      if (c.field) {
        const error = JSON.parse(run.stderr.trim()).error;
        expect(error.code).toBe('invalid_request');
        expect(error.details.field).toBe(c.field);
        expect(error.details.allowed_values?.length ?? 1).toBeGreaterThan(0);
      }
    }
    const unknownTop = await nimbus(env, 'launch');
    expect(unknownTop.code).toBe(2);
    expect(unknownTop.stderr).toMatch(/Unknown command "launch"/);

    // Nothing changed.
    const after = await json<AccountListing>(env, 'list-accounts');
    expect(after).toEqual(before);
  }, 120_000);
});

describe.each(STORES)('bootstrap on first start (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-boot-' });
  const { dataDir } = suite;
  const file = path.join(dataDir, 'bootstrap-api-key');

  const start = () =>
    startTestServer({ dataDir, ...(suite.databaseUrl ? { databaseUrl: suite.databaseUrl } : {}) });

  it('writes <data dir>/bootstrap-api-key (0600) holding a working key, logs the path but never the key', async () => {
    expect(existsSync(file)).toBe(false);
    const server = await start();
    try {
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const key = readFileSync(file, 'utf8').trim();
      expect(key).toMatch(/^nmb_[0-9A-Za-z]{43}$/);

      const me = await server.request('GET', '/v1/account', { key });
      expect(me.status).toBe(200);
      expect(me.body.data).toMatchObject({ plan: 'enterprise', status: 'active' });
      const keys = await server.request('GET', '/v1/account/api-keys', { key });
      expect(keys.body.data).toEqual([expect.objectContaining({ permissions: ['*'] })]);

      const logs = server.logs();
      expect(logs).toContain(file);
      expect(logs).toMatch(/bootstrap/);
      // The API listener is HTTPS and says so (the metadata service, plain HTTP, logs its own line).
      const listening = logs
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { msg?: string; component?: string })
        .filter((line) => line.msg?.startsWith('Server listening at') && line.component === undefined);
      expect(listening.map((line) => line.msg)).toEqual([
        expect.stringMatching(/^Server listening at https:\/\//),
      ]);
      expect(logs).not.toContain(key);
      expect(logs).not.toContain(key.slice(4));
    } finally {
      await server.close();
    }
  });

  it('a restart on the same store creates no second bootstrap account and keeps the key file', async () => {
    const key = readFileSync(file, 'utf8');
    const server = await start();
    try {
      const listing = await server.admin<AccountListing>('list-accounts');
      expect(listing.accounts).toHaveLength(1);
      expect(readFileSync(file, 'utf8')).toBe(key);
      expect(server.logs()).not.toMatch(/created the bootstrap account/);
      const me = await server.request('GET', '/v1/account', { key: key.trim() });
      expect(me.status).toBe(200);
      expect(me.body.data.id).toBe(listing.accounts[0]!.id);
    } finally {
      await server.close();
    }
  });
});
