/**
 * The job runner: a wake far in the future is kept for its time, not fired at once; many jobs run at once
 * (a claim is made while others run, and when a job falls due); a short wait is taken in process, under
 * the same lease.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/helpers/common.js';
import { MIGRATIONS } from '../../resources.js';
import { systemClock } from '../domain/clock.js';
import { migrateToLatest, openStore, type Store } from '../store/db.js';
import { JobRunner } from './runner.js';

const DAY_MS = 86_400_000;

describe('job runner wakes', () => {
  let dataDir = '';
  let store: Store;
  let runner: JobRunner;
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);

  beforeEach(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-runner-'));
    store = openStore({ dataDir });
    await migrateToLatest(store.db, MIGRATIONS);
    runner = new JobRunner(store, systemClock, { automatic: true, pollMs: 60_000 });
    process.on('warning', onWarning);
  });

  afterEach(async () => {
    process.off('warning', onWarning);
    await runner.stop();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  // A billing job due on the 1st of a 31-day month, woken on the 2nd, is 29 days away: more than
  // setTimeout holds, which Node answered with a warning and a timer that fired after 1 ms.
  it('arms a wake 30 days ahead without overflowing the timer', async () => {
    runner.wake(new Date(Date.now() + 30 * DAY_MS));
    // Node emits the overflow warning on the next turn of the event loop.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.filter((w) => w.startsWith('TimeoutOverflowWarning'))).toEqual([]);
  });

  it('keeps more jobs running than one claim takes, claiming while the others run', async () => {
    const busy = new JobRunner(store, systemClock, {
      automatic: true,
      pollMs: 60_000,
      batchSize: 8,
      maxInFlight: 64,
    });
    let running = 0;
    let mostAtOnce = 0;
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    busy.register('hold', {
      run: async () => {
        running++;
        mostAtOnce = Math.max(mostAtOnce, running);
        await gate;
        running--;
        return null;
      },
      giveUp: async () => {},
    });
    await store.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 40; i++) await busy.enqueue(trx, 'hold', `subject_${i}`);
    });
    busy.start();
    try {
      // With one batch at a time (the runner before) at most 8 ran at once, and this never held.
      await waitFor('40 jobs running at once', () => (running === 40 ? true : undefined));
      open();
      await waitFor('the jobs finished', async () => {
        const left = await store.db.selectFrom('jobs').select('id').execute();
        return left.length === 0 ? true : undefined;
      });
      expect(mostAtOnce).toBe(40);
    } finally {
      open();
      await busy.stop();
    }
  });

  // Found with the background pool (issue 18): a job waiting long (for a connection of a busy pool) left
  // the run waiting for it to end, and a boot that fell due meanwhile waited with it.
  it('runs a job that falls due while another one is still running', async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let quickRan = false;
    runner.register('slow', { run: () => gate.then(() => null), giveUp: async () => {} });
    runner.register('quick', {
      run: async () => {
        quickRan = true;
        return null;
      },
      giveUp: async () => {},
    });
    try {
      await store.db.transaction().execute((trx) => runner.enqueue(trx, 'slow', 'subject'));
      runner.wake();
      await waitFor('the slow job claimed', async () => {
        const row = await store.db.selectFrom('jobs').select('lease_owner').executeTakeFirst();
        return row?.lease_owner ? true : undefined;
      });
      await store.db.transaction().execute((trx) => runner.enqueue(trx, 'quick', 'subject'));
      runner.wake();
      await waitFor('the quick job ran', () => (quickRan ? true : undefined));
    } finally {
      open();
    }
  });

  it('waits in process for a step due within a moment, under the lease it holds', async () => {
    const leases: (string | null)[] = [];
    let runs = 0;
    runner.register('soon', {
      run: async (subjectId) => {
        const row = await store.db
          .selectFrom('jobs')
          .select('lease_until')
          .where('subject_id', '=', subjectId)
          .executeTakeFirstOrThrow();
        leases.push(row.lease_until);
        runs++;
        return runs < 3 ? new Date(Date.now() + 20) : null;
      },
      giveUp: async () => {},
    });
    await store.db.transaction().execute((trx) => runner.enqueue(trx, 'soon', 'subject'));
    runner.wake();
    await waitFor('the job ran three times and finished', async () => {
      const left = await store.db.selectFrom('jobs').select('id').execute();
      return runs === 3 && left.length === 0 ? true : undefined;
    });
    // One claim: rescheduled and claimed again, each run would hold a lease of its own.
    expect(leases).toHaveLength(3);
    expect(new Set(leases).size).toBe(1);
    expect(leases[0]).not.toBeNull();
  });
});
