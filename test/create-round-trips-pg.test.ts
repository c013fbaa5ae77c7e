/**
 * What one create and its boot cost PostgreSQL in round trips (issue 33, item 1), counted by the store
 * (store.roundTripStats(): every query a connection submits, BEGIN and COMMIT included, is one wait for
 * PostgreSQL's answer). A count, not a time, so it does not depend on the host's load. One request at a
 * time, jobs stepped by hand, so nothing else talks to PostgreSQL in between: a change that adds a trip to
 * the create or the boot fails here. test/create-commits.test.ts pins the same path's commits on SQLite.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { COMPUTE, costOfCreateAndBoot } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

/**
 * Budgets: the figures measured when they were set, so a regression shows. Issue 33 asks for a create
 * with its boot in at most 15. Measured at first: 19 for the request, 40 for its boot (59); the boot 30 once a job claim on PostgreSQL was
 * one statement (4 trips to 1, an empty poll 3 to 1); then 18 and 27 once a transaction's BEGIN went out
 * with its first statement (pipelined), one trip less per transaction; then 10 and 20 once the writes whose
 * answer nobody reads (new rows, events, meter intervals, counts, the job, the simulator's machine and call
 * count) went out behind the statement that follows them (compiled-query.ts `write`); then a boot 19, its
 * second look after provisioning and starting the machine deciding on the instance it already read; then
 * 18, a job's finish (its delete, or its lease's release) one statement written behind; then 19, the
 * boot's price switch waiting for its new interval's number (the month's totals mark the open interval:
 * billing migration 0023).
 */
const CREATE_ROUND_TRIPS = 10;
const BOOT_ROUND_TRIPS = 19;
const TARGET = 15;

describe('Round trips per create (PostgreSQL)', () => {
  const clock = new ManualClock(new Date('2026-09-01T00:00:00Z'));
  const server = serverForSuite({ store: 'postgres', clock, steppedJobs: true });

  function trips(): number {
    const found = server.running.backends.store.roundTripStats();
    if (!found) throw new Error('no round-trip count on this store');
    return found.roundTrips;
  }

  it(`a create takes at most ${CREATE_ROUND_TRIPS} round trips and its boot ${BOOT_ROUND_TRIPS}`, async () => {
    const key = server.rootKey;
    const jobs = server.running.backends.jobs;
    // The first creates set up what is made once per account and region (address scopes and their first
    // chunk of free addresses, prepared statements on the connections); the third probes the scopes, so
    // the counted create is one of the 31 in 32 that skip the probe (two round trips, one per scope, on
    // the 32nd). Then quiet.
    for (const name of ['first', 'second', 'third']) {
      const made = await server.request('POST', '/v1/instances', { key, body: { name, ...COMPUTE } });
      expect(made.status, made.text).toBe(202);
    }
    for (let i = 0; i < 20; i++) {
      clock.advance(10_000);
      await jobs.runDue();
    }

    const cost = await costOfCreateAndBoot(server, clock, () => ({ trips: trips() }));
    const create = cost.create.trips;
    const boot = cost.boot.trips;
    console.log(`round trips: create ${create}, boot ${boot}, together ${create + boot} (target ${TARGET})`);
    expect(create).toBeLessThanOrEqual(CREATE_ROUND_TRIPS);
    expect(boot).toBeLessThanOrEqual(BOOT_ROUND_TRIPS);
  });
});
