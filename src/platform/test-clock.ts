/**
 * A clock another process sets: NIMBUS_TEST_CLOCK_FILE names a file holding an ISO 8601 time, and every
 * reading of this clock reads that file. It lets a test that runs the real server as a child process (and
 * kills it with SIGKILL) decide what time it is in there, as ManualClock does inside the test's own
 * process. Test-only: platform/config.ts refuses the setting unless NODE_ENV=test.
 *
 * The file is read on every call, without caching, so a time the test writes holds from the next reading
 * on; a test replaces the file whole (write elsewhere, then rename) so a reading never sees half a time.
 */
import { readFileSync } from 'node:fs';
import type { Clock } from './domain/clock.js';

export class FileClock implements Clock {
  constructor(private readonly file: string) {
    this.nowMs(); // a missing or unreadable file fails the start, not the first request
  }

  now(): Date {
    return new Date(this.nowMs());
  }

  nowMs(): number {
    const text = readFileSync(this.file, 'utf8').trim();
    const at = Date.parse(text);
    if (Number.isNaN(at)) {
      throw new Error(`NIMBUS_TEST_CLOCK_FILE ${this.file} holds ${JSON.stringify(text)}, not an ISO time`);
    }
    return at;
  }
}
