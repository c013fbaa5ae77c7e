/**
 * Events ordering, through HTTPS on both stores: a page of GET /v1/events never shows an event without
 * the earlier ones of its resource that committed before it. The list's count and its page are two
 * statements, and a boot's `instance.started` can commit between them; when the count cut the page,
 * `?resource_id=` newest first showed `instance.started` alone with `total_items: 1` (platform/store/lists.ts).
 * The window is a few hundred microseconds, so the test reads each new instance's events, several at a
 * time, while its boot commits; on PostgreSQL it failed within a few dozen instances before the fix.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, waitFor } from './helpers/common.js';
import { COMPUTE } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

const INSTANCES = 40;
const READS_AT_ONCE = 3;

describe.each(STORES)('event pages while events commit (%s)', (store) => {
  const server = serverForSuite({ store });

  it('instance.started is never listed without instance.created, and total_items counts what is shown', async () => {
    const owner = await account(server);
    for (let i = 0; i < INSTANCES; i++) {
      const created = await server.request('POST', '/v1/instances', {
        key: owner.key,
        body: { name: `snap-${i}`, ...COMPUTE },
      });
      expect(created.status, created.text).toBe(202);
      const id = created.body.data.id as string;
      const pages = await waitFor(`${id} started`, async () => {
        const replies = await Promise.all(
          Array.from({ length: READS_AT_ONCE }, () =>
            server.request('GET', `/v1/events?resource_id=${id}`, { key: owner.key }),
          ),
        );
        const started = replies.filter((r) => r.body.data.some((e: any) => e.type === 'instance.started'));
        return started.length > 0 ? replies : undefined;
      });
      for (const page of pages) {
        const types = page.body.data.map((e: any) => e.type);
        if (types.includes('instance.started')) expect(types).toContain('instance.created');
        expect(page.body.pagination.total_items).toBe(types.length);
      }
    }
  });
});
