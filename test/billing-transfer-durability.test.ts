/**
 * Data transfer across kill -9 (issue 31, item 7), on both stores: the real server as a child process
 * (`bin/nimbus serve`) on a clock the test sets (NIMBUS_TEST_CLOCK_FILE), killed with SIGKILL right after
 * the clock moves on — so at any point of the transfer round it then runs: before the driver is read,
 * between the reading and the transaction that counts it, or after. The simulator's counter of the
 * instance (sim_transfer, drivers/simulator/transfer.ts) is what the driver has reported in all; billing
 * keeps its last counted reading in the transaction that adds the bytes (resources/billing/
 * transfer-store.ts), so when the rounds are over the bytes billed are exactly the counter: none twice,
 * none lost (a kill between a reading and its count leaves the bytes to the next reading).
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from './helpers/backends.js';
import { restartableServer } from './helpers/child-server.js';
import { waitFor } from './helpers/common.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-03-01T00:00:00Z');
/** Four starts of the server on a loaded host, and the last round. */
const STEP_TIMEOUT_MS = 420_000;
/** Public bytes sent a second: a quarter of the pinned 4,000,000 B/s. */
const OUT_PER_SECOND = 1_000_000;

describe.each(STORES)('data transfer across kill -9 (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-transfer-kill-' });
  const clockDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-transfer-clock-'));
  const clockFile = path.join(clockDir, 'now');
  afterAll(() => rmSync(clockDir, { recursive: true, force: true }));
  const server = restartableServer(suite, {
    env: { NODE_ENV: 'test', NIMBUS_TEST_CLOCK_FILE: clockFile, NIMBUS_SIM_SPEEDUP: '1000' },
  });
  const { live, start, kill, inspect } = server;

  let clockMs = 0;
  const setClock = (ms: number) => {
    clockMs = ms;
    writeFileSync(`${clockFile}.next`, new Date(T0 + ms).toISOString());
    renameSync(`${clockFile}.next`, clockFile);
  };
  const call = (method: string, url: string, body?: unknown) =>
    live().request(method, url, { key: live().rootKey, ...(body === undefined ? {} : { body }) });
  /** Bytes billed (counted) and bytes the simulator has reported, for the instance. */
  const counts = (id: string) =>
    inspect(async (db) => {
      const billed = await db
        .selectFrom('transfer_day_totals')
        .select(sql<string>`coalesce(sum(bytes_out), 0)`.as('out'))
        .where('resource_id', '=', id)
        .executeTakeFirstOrThrow();
      const reported = await sql<{
        bytes_out: string;
      }>`select bytes_out from sim_transfer where machine_id = ${id}`.execute(db);
      return { billed: Number(billed.out), reported: Number(reported.rows[0]?.bytes_out ?? 0) };
    });

  beforeAll(async () => {
    setClock(0);
    await start();
  });

  it(
    'kills at any point of the rounds bill every reported byte once',
    async () => {
      const created = await call('POST', '/v1/instances', {
        name: 'web',
        instance_type: 'compute-2x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
        tags: { 'nimbus.sim/metrics': 'net_tx_bps=4000000,net_rx_bps=8000000' },
      });
      expect(created.status, created.text).toBe(202);
      const id = created.body.data.id as string;
      let seen = '';
      await waitFor(
        'running',
        async () => {
          setClock(clockMs + 5);
          const reply = await call('GET', `/v1/instances/${id}`);
          seen = reply.body?.data?.status;
          return seen === 'running' ? true : undefined;
        },
        { intervalMs: 100, lastSeen: () => seen },
      );

      // Three rounds, each killed as soon as the clock has moved on (the round may have begun, or not).
      for (let round = 1; round <= 3; round++) {
        setClock(round * HOUR);
        await kill();
        await start();
      }
      // One round more, left to finish: everything reported up to now is counted.
      setClock(4 * HOUR);
      const final = await waitFor(
        'the last round counted',
        async () => {
          const now = await counts(id);
          return now.reported >= 4 * 3600 * OUT_PER_SECOND * 0.999 && now.billed === now.reported
            ? now
            : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      expect(final.billed).toBe(final.reported);
      // And the usage shows it.
      const usage = (await call('GET', '/v1/billing/usage')).body.data;
      const line = usage.line_items.find((item: any) => item.meter === 'data_transfer');
      // What the store holds, named in a failure.
      const held = await inspect(async (db) => ({
        days: await db.selectFrom('transfer_day_totals').selectAll().execute(),
        bases: await db.selectFrom('transfer_counters').selectAll().execute(),
        sim: (await sql`select * from sim_transfer`.execute(db)).rows,
        lines: usage.line_items,
      }));
      expect(line.quantity, JSON.stringify(held)).toBeCloseTo(final.billed / 2 ** 30, 5);
      expect(line.quantity).toBeCloseTo((4 * 3600 * OUT_PER_SECOND) / 2 ** 30, 2);
    },
    STEP_TIMEOUT_MS,
  );
});
