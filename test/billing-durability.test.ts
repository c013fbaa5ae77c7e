/**
 * Billing survives kill -9 (issue 16), on both stores: the real server as a child process (`bin/nimbus
 * serve`), killed with SIGKILL, on a clock the test sets (NIMBUS_TEST_CLOCK_FILE, src/platform/test-clock.ts: the
 * child reads its time from a file the test writes). The seconds billed come from the metered intervals
 * each state change commits, so a process that dies without any shutdown code — and stays dead for hours
 * while its instance keeps running — bills exactly what a process that never died would have.
 *
 * The simulator runs a thousand times faster than real time (a boot 8 ms, a stop 5 ms of the clock), and
 * the test lets work finish by moving the clock on a few ms at a time after each request; billing takes each end of an
 * interval down to its second, so the billed intervals are the whole hours the test sets. By hand, from
 * the prices (docs/design.md, "Billing"):
 *
 *   compute-2x running 10 h (killed at 4 h, down until 7 h)   10 × $0.10                 = $1.000000
 *   its 50 GB root disk stopped 2 h                            50 × $0.10 × 2/730        = $0.013698630… → 0.013699
 *   100 GB volume, 15 days (360 h)                             100 × $0.10 × 360/730     = $4.931506849… → 4.931507
 *   compute-1x running 3 h, killed right after its stop's 202  3 × $0.05                  = $0.150000
 *   its 25 GB root disk stopped from then, 21 h to day 2's end 25 × $0.10 × 21/730       = $0.071917808… → 0.071918
 *   exact sum   1.15 + (10 + 3600 + 52.5)/730 = 1.15 + 5.017123287… = $6.167123287…     → subtotal 6.167123
 *   total (rounded once)                                                                  = $6.17
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, storeForSuite } from './helpers/backends.js';
import { restartableServer } from './helpers/child-server.js';
import { waitFor } from './helpers/common.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2026-03-01T00:00:00Z');
/** Each step starts the server once or twice and waits on the simulator: roomy on a loaded host. */
const STEP_TIMEOUT_MS = 90_000;

describe.each(STORES)('billing across kill -9, on a clock the test sets (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-billing-kill-' });
  const clockDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-billing-clock-'));
  const clockFile = path.join(clockDir, 'now');
  // Registered ahead of the server's hook, so it runs after the last process is gone.
  afterAll(() => rmSync(clockDir, { recursive: true, force: true }));
  const server = restartableServer(suite, {
    env: { NODE_ENV: 'test', NIMBUS_TEST_CLOCK_FILE: clockFile, NIMBUS_SIM_SPEEDUP: '1000' },
  });
  const { live, start, kill } = server;
  const ids = { web: '', worker: '', volume: '' };
  /** The worker's stop as the API answered it (202): when its compute stopped being billed. */
  let stoppingAt = '';

  /** The child's now, as ms since T0. */
  let clockMs = 0;
  /** Sets the child's now to T0 + `ms` (written whole, then renamed, so it never reads half a time). */
  const setClock = (ms: number) => {
    clockMs = ms;
    writeFileSync(`${clockFile}.next`, new Date(T0 + ms).toISOString());
    renameSync(`${clockFile}.next`, clockFile);
  };
  const call = async (method: string, url: string, body?: unknown) => {
    const reply = await live().request(method, url, {
      key: live().rootKey,
      ...(body === undefined ? {} : { body }),
    });
    return reply;
  };
  const accepted = async (method: string, url: string, body?: unknown) => {
    const reply = await call(method, url, body);
    expect(reply.status, reply.text).toBe(202);
    return reply.body.data;
  };
  /**
   * Waits for the resource at `url` to reach `status` (null: gone) while the clock moves on 5 ms a probe:
   * simulated work is due a few ms of the clock after each step, and the runner's poll finds it once the
   * clock has passed that. A wait stays well inside the second the step began in (10 s of probes: 500 ms).
   */
  const settle = async (url: string, status: string | null) => {
    let seen = '';
    await waitFor(
      `${url} ${status ?? 'gone'}`,
      async () => {
        setClock(clockMs + 5);
        const reply = await call('GET', url);
        seen = `${reply.status} ${reply.body?.data?.status}`;
        if (status === null) return reply.status === 404 ? true : undefined;
        return reply.body?.data?.status === status ? true : undefined;
      },
      { intervalMs: 100, lastSeen: () => seen },
    );
  };
  const usage = async (query = '') => (await call('GET', `/v1/billing/usage${query}`)).body.data;

  beforeAll(async () => {
    setClock(0);
    await start();
  });

  it(
    'a server killed while an instance runs, and down for three hours, bills the same seconds',
    async () => {
      const web = await accepted('POST', '/v1/instances', {
        name: 'web',
        instance_type: 'compute-2x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
        // Traffic pinned to none: the figures here are of time (data transfer: billing-transfer.test.ts).
        tags: { 'nimbus.sim/metrics': 'net_tx_bps=0,net_rx_bps=0' },
      });
      ids.web = web.id;
      const volume = await accepted('POST', '/v1/volumes', {
        name: 'data',
        size_gb: 100,
        region: 'us-east-1',
      });
      ids.volume = volume.id;
      await settle(`/v1/instances/${web.id}`, 'running');
      await settle(`/v1/volumes/${volume.id}`, 'available');

      setClock(4 * HOUR);
      const beforeKill = await usage();
      expect(beforeKill.line_items.find((line: any) => line.resource_id === web.id)).toMatchObject({
        quantity: 4,
        amount: 0.4,
      });
      await kill();

      // Three hours with no server at all; the machine keeps running meanwhile (its state is in the store).
      setClock(7 * HOUR);
      await start();
      const afterStart = await usage();
      expect(afterStart.end).toBe('2026-03-01T07:00:00.000Z');
      expect(afterStart.line_items.find((line: any) => line.resource_id === web.id)).toMatchObject({
        instance_type: 'compute-2x',
        quantity: 7,
        amount: 0.7,
      });

      setClock(10 * HOUR);
      await accepted('POST', `/v1/instances/${web.id}/stop`, {});
      await settle(`/v1/instances/${web.id}`, 'stopped');
      setClock(12 * HOUR);
      await accepted('DELETE', `/v1/instances/${web.id}`);
      await settle(`/v1/instances/${web.id}`, null);
    },
    STEP_TIMEOUT_MS,
  );

  it(
    'a server killed right after a stop is accepted bills compute up to the stop it acknowledged',
    async () => {
      setClock(DAY);
      const worker = await accepted('POST', '/v1/instances', {
        name: 'worker',
        instance_type: 'compute-1x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
        // Traffic pinned to none: the figures here are of time (data transfer: billing-transfer.test.ts).
        tags: { 'nimbus.sim/metrics': 'net_tx_bps=0,net_rx_bps=0' },
      });
      ids.worker = worker.id;
      await settle(`/v1/instances/${worker.id}`, 'running');
      const running = (await call('GET', `/v1/instances/${worker.id}`)).body.data;
      const runningSince: string = running.updated_at; // when it became running

      setClock(DAY + 3 * HOUR);
      const stopping = await accepted('POST', `/v1/instances/${worker.id}/stop`, {});
      await kill(); // the stop is still in flight: the machine has not stopped yet
      expect(stopping.status).toBe('stopping');
      stoppingAt = stopping.updated_at;
      expect(stoppingAt).toBe('2026-03-02T03:00:00.000Z');

      // Two hours later a new process finds the stop half done and finishes it.
      setClock(DAY + 5 * HOUR);
      await start();
      await settle(`/v1/instances/${worker.id}`, 'stopped');

      // Compute is billed from the transition to running to the acknowledged stop, to the second.
      const second = (iso: string) => Math.floor(Date.parse(iso) / 1000);
      const computeSeconds = second(stoppingAt) - second(runningSince);
      expect(computeSeconds).toBe(3 * 3600);
      setClock(2 * DAY);
      const lines = (await usage()).line_items.filter((line: any) => line.resource_id === worker.id);
      expect(lines.map((line: any) => [line.meter, line.quantity, line.amount])).toEqual([
        ['instance_compute', computeSeconds / 3600, 0.15],
        ['instance_storage', 0.719178, 0.071918], // 25 GB × 21 h = 525 GB-h = 0.719178 GB-months
      ]);
      await accepted('DELETE', `/v1/instances/${worker.id}`);
      await settle(`/v1/instances/${worker.id}`, null);
    },
    STEP_TIMEOUT_MS,
  );

  it(
    'the month, closed by the restarted server, is the hand-computed invoice',
    async () => {
      setClock(15 * DAY);
      await accepted('DELETE', `/v1/volumes/${ids.volume}`);
      await settle(`/v1/volumes/${ids.volume}`, null);

      // One more kill before the month ends; the server started after it closes March on its own.
      await kill();
      setClock(31 * DAY + HOUR); // 2026-04-01T01:00Z
      await start();
      const invoice = await waitFor('March closed', async () => {
        const march = (await call('GET', '/v1/billing/invoices?period=2026-03')).body.data;
        return march?.[0]?.status === 'open' ? march[0] : undefined;
      });
      const full = (await call('GET', `/v1/billing/invoices/${invoice.id}`)).body.data;
      expect(full).toMatchObject({
        period_start: '2026-03-01T00:00:00.000Z',
        period_end: '2026-04-01T00:00:00.000Z',
        subtotal: 6.167123,
        total: 6.17,
      });
      expect(
        full.line_items.map((line: any) => [line.resource_id, line.meter, line.quantity, line.amount]),
      ).toEqual([
        [ids.web, 'instance_compute', 10, 1],
        [ids.web, 'instance_storage', 0.136986, 0.013699], // 50 GB × 2 h = 100 GB-h
        [ids.worker, 'instance_compute', 3, 0.15],
        [ids.worker, 'instance_storage', 0.719178, 0.071918],
        [ids.volume, 'volume_storage', 49.315068, 4.931507],
      ]);
      // Usage of March read after the close says the same.
      const march = await usage('?start=2026-03-01T00:00:00Z&end=2026-04-01T00:00:00Z');
      expect(march.subtotal).toBe(6.167123);
      expect(march.total).toBe(6.17);
    },
    STEP_TIMEOUT_MS,
  );
});
