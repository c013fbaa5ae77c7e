import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../resources.js';
import { migrateToLatest, openStore, type Store } from './db.js';

describe('the SQLite store', () => {
  let store: Store | undefined;
  let dataDir = '';
  afterEach(async () => {
    await store?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates an owner-only WAL file with 16 KiB pages (deep list pages depend on it) and in-memory sub-journals', async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-db-'));
    store = openStore({ dataDir });
    await migrateToLatest(store.db, MIGRATIONS);
    const pragma = async (name: string) =>
      Object.values((await sql.raw(`pragma ${name}`).execute(store!.db)).rows[0] as object)[0];
    expect(await pragma('page_size')).toBe(16384);
    expect(await pragma('journal_mode')).toBe('wal');
    // 2 = MEMORY: the savepoint sub-journals of group commit never spill to temp files.
    expect(await pragma('temp_store')).toBe(2);
    expect(statSync(path.join(dataDir, 'nimbus.db')).mode & 0o777).toBe(0o600);
  });
});
