/** The job runner's timers: a wake far in the future is kept for its time, not fired at once. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
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
    await migrateToLatest(store.db);
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
});
