/**
 * Events ordering: a numbered page against a count that is behind the rows (platform/store/lists.ts). The count
 * is its own statement, so a commit can land between it and the page (PostgreSQL READ COMMITTED; SQLite
 * group commit); `total` given here stands for exactly that count, on a real store of each kind. The
 * page must never drop a row its own read sees in the middle of the list: with the count cutting the
 * page, `GET /v1/events?resource_id=` showed `instance.started` without `instance.created`.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from '../../../test/helpers/backends.js';
import { MIGRATIONS } from '../../resources.js';
import { insertEvent } from '../events/store.js';
import { migrateToLatest, openStore, type Store } from './db.js';
import { fetchPage } from './lists.js';

const AT = '2026-11-28T00:00:00.000Z';

describe.each(STORES)('a numbered page behind a stale count (%s)', (kind) => {
  const backing = storeForSuite(kind, { dataDirPrefix: 'nimbus-lists-' });
  let store: Store;
  let accounts = 0;
  beforeAll(async () => {
    store = openStore({ dataDir: backing.dataDir, databaseUrl: backing.databaseUrl });
    await migrateToLatest(store.db, MIGRATIONS);
  });
  afterAll(async () => {
    await store.close();
  });

  async function accountWithEvents(count: number): Promise<{ accountId: string; ids: string[] }> {
    accounts += 1;
    const accountId = `acct_${kind}_lists_${accounts}`;
    const ids = Array.from({ length: count }, (_, n) => `evt_${accounts}_${String(n).padStart(4, '0')}`);
    for (const id of ids) {
      await insertEvent(store.db, {
        id,
        account_id: accountId,
        type: 'instance.created',
        resource_id: 'ins_1',
        data: {},
        created_at: AT,
      });
    }
    return { accountId, ids };
  }

  const page = (
    accountId: string,
    request: { page: number; limit: number; order: 'asc' | 'desc' },
    total: number,
  ) =>
    fetchPage(
      store.db.selectFrom('events').select(['id']).where('account_id', '=', accountId),
      { ...request, sort: 'seq' },
      { total },
    );

  it('shows both events newest first when the count saw only the first', async () => {
    const { accountId, ids } = await accountWithEvents(2);
    const shown = await page(accountId, { page: 1, limit: 20, order: 'desc' }, 1);
    expect(shown.items.map((row) => row.id)).toEqual([...ids].reverse());
    expect(shown.pagination).toMatchObject({ total_items: 2, has_next: false });
  });

  it('any page is a run of the list as it is; one read from the front is exactly its slice', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom('asc' as const, 'desc' as const),
        async (rows, behind, limit, pageNumber, order) => {
          const { accountId, ids } = await accountWithEvents(rows);
          const list = order === 'asc' ? ids : [...ids].reverse();
          const counted = Math.max(0, rows - behind);
          const shown = (await page(accountId, { page: pageNumber, limit, order }, counted)).items.map(
            (row) => row.id,
          );
          const offset = (pageNumber - 1) * limit;
          if (shown.length === 0) return;
          const at = list.indexOf(shown[0] as string);
          expect(shown).toEqual(list.slice(at, at + shown.length));
          const wanted = Math.min(limit, counted - offset);
          const fromFront = counted - offset - wanted >= offset;
          if (fromFront) expect(shown).toEqual(list.slice(offset, offset + limit));
        },
      ),
      { numRuns: 60 },
    );
  });
});
