/**
 * The server and other processes (admin commands) share one SQLite file. A write transaction that
 * meets another process's write must wait for it, not fail.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { serverForSuite } from './helpers/server.js';

/** Another process takes the write lock, writes, and commits after `holdMs`; resolves once it holds the lock. */
function holdWriteLock(databaseFile: string, holdMs: number): Promise<{ done: Promise<number | null> }> {
  const script = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.pragma('busy_timeout = 5000');
    db.exec('begin immediate');
    db.prepare('insert into settings (key, value) values (?, ?)').run('held-by-another-process', 'x');
    process.stdout.write('locked\\n');
    setTimeout(() => { db.exec('commit'); db.close(); }, ${holdMs});
  `;
  const child = spawn(process.execPath, ['-e', script, databaseFile], {
    cwd: path.resolve(import.meta.dirname, '..'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const done = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve({ done }));
    child.once('exit', (code) => reject(new Error(`lock holder exited early (${code})`)));
  });
}

describe('SQLite shared with another process', () => {
  const server = serverForSuite({ store: 'sqlite' });

  it('a write that meets another process’s write transaction waits for it and succeeds', async () => {
    // Warm up: the account and key are cached, so the request below reaches its transaction at once.
    expect((await server.request('GET', '/v1/account', { key: server.rootKey })).status).toBe(200);
    const holder = await holdWriteLock(path.join(server.config.dataDir, 'nimbus.db'), 700);
    // Creating a key reads (quota) and then writes in one transaction.
    const created = await server.request('POST', '/v1/account/api-keys', {
      key: server.rootKey,
      body: { name: 'while locked', permissions: ['account:read'] },
    });
    expect(created.status, created.text).toBe(201);
    expect(await holder.done).toBe(0);
    const keys = await server.request('GET', '/v1/account/api-keys?limit=100', { key: server.rootKey });
    expect(keys.body.data.map((k: { name: string }) => k.name)).toContain('while locked');
  });
});
