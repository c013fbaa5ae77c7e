/**
 * The lifecycle core with a kind that is not an instance: a small volume-like resource in a table of its
 * own, over a real SQLite store, a manual clock and the job runner in stepped mode. It shows the core
 * holds no instance knowledge: conflicts, guarded writes, events, the reconcile job's steps and giving
 * up all come from the kind's table, store functions and reconciler. It also covers what the core offers
 * kinds beyond that: a kind's own reason for a refusal, records held before the kind's, an advance that
 * carries an event, writes made inside another record's transaction, a create's quota claim at the end of
 * its transaction, the counts a kind keeps, and a record made as part of another's create.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { quotaSettings } from '../../resources/account/store.js';
import { MIGRATIONS } from '../../resources.js';
import { ManualClock } from '../domain/clock.js';
import { Conflict, NotFound } from '../errors.js';
import { JobRunner } from '../jobs/runner.js';
import { QuotaService } from '../quotas/quotas.js';
import { migrateToLatest, openStore, type Store } from '../store/db.js';
import type { Executor } from '../store/schema.js';
import { conflict, Lifecycle, type Reconciler, type ResourceKind, type Step } from './lifecycle.js';
import { defineStateTable } from './state-table.js';

type DiskStatus = 'creating' | 'available' | 'in-use' | 'detaching' | 'deleting' | 'error';
type DiskAction = 'attach' | 'detach' | 'delete';
type DiskEvent = 'volume.created' | 'volume.attached' | 'volume.detached' | 'volume.deleted';

interface Disk {
  id: string;
  account_id: string;
  name: string;
  status: DiskStatus;
  instance_id: string | null;
  version: number;
  updated_at: string;
}
type DiskChanges = Partial<Pick<Disk, 'instance_id'>>;
type Tables = { test_disks: Disk };

const DISK_STATES = defineStateTable<DiskStatus, DiskAction>({
  kind: 'disk',
  statuses: ['creating', 'available', 'in-use', 'detaching', 'deleting', 'error'],
  create: { status: 'creating', target: 'available' },
  actions: {
    attach: { from: ['available'], to: 'in-use' },
    detach: { from: ['in-use'], to: 'detaching', target: 'available' },
    delete: { from: ['available', 'error'], to: 'deleting', target: 'gone' },
  },
});

const tables = (db: Executor) => db as unknown as Kysely<Tables>;

const DISK_KIND: ResourceKind<DiskStatus, DiskAction, Disk, DiskChanges, DiskEvent> = {
  table: DISK_STATES,
  resource: 'volume',
  find: (db, id) => tables(db).selectFrom('test_disks').selectAll().where('id', '=', id).executeTakeFirst(),
  lock: (db, accountId, id) =>
    tables(db)
      .selectFrom('test_disks')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst(),
  insert: async (db, disk) => {
    await tables(db).insertInto('test_disks').values(disk).execute();
  },
  update: (db, current, changes) =>
    tables(db)
      .updateTable('test_disks')
      .set({ ...changes, version: current.version + 1 })
      .where('id', '=', current.id)
      .where('version', '=', current.version)
      .returningAll()
      .executeTakeFirst(),
  remove: async (db, current) => {
    const deleted = await tables(db)
      .deleteFrom('test_disks')
      .where('id', '=', current.id)
      .where('version', '=', current.version)
      .executeTakeFirst();
    return deleted.numDeletedRows > 0n;
  },
  eventData: (disk) => ({ volume_id: disk.id, name: disk.name, status: disk.status }),
};

/** A reconciler scripted by the test: each call takes the next answer (or fails, or throws). */
class ScriptedReconciler implements Reconciler<DiskStatus, Disk, DiskChanges, DiskEvent> {
  readonly seen: DiskStatus[] = [];
  constructor(
    private readonly decide: (
      disk: Disk,
    ) => Step<DiskStatus, DiskChanges, DiskEvent> | Promise<Step<DiskStatus, DiskChanges, DiskEvent>>,
  ) {}
  async step(disk: Disk) {
    this.seen.push(disk.status);
    return this.decide(disk);
  }
  giveUp(): Step<DiskStatus, DiskChanges, DiskEvent> {
    return { next: 'settle', changes: { status: 'error' }, event: { type: 'volume.detached' } };
  }
}

describe('Lifecycle (a kind other than instances)', () => {
  let dataDir = '';
  let store: Store;
  let clock: ManualClock;
  let jobs: JobRunner;
  let lifecycle: Lifecycle;
  let counter = 0;

  beforeEach(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-lifecycle-'));
    store = openStore({ dataDir });
    await migrateToLatest(store.db, MIGRATIONS);
    await tables(store.db)
      .schema.createTable('test_disks')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('instance_id', 'text')
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    clock = new ManualClock();
    jobs = new JobRunner(store, clock, { automatic: false });
    lifecycle = new Lifecycle(store, clock, jobs, { quotas: new QuotaService(store, quotaSettings) });
  });
  afterEach(async () => {
    await jobs.stop();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const newDisk = (status: DiskStatus = 'creating'): Promise<Disk> => {
    counter += 1;
    return lifecycle.create(DISK_KIND, {
      event: 'volume.created',
      accountId: 'acct_a',
      build: () => ({
        id: `disk_${counter}`,
        account_id: 'acct_a',
        name: `disk-${counter}`,
        status,
        instance_id: null,
        version: 1,
        updated_at: clock.now().toISOString(),
      }),
    });
  };
  const eventsOf = async (id: string) =>
    (
      await store.db
        .selectFrom('events')
        .select(['type', 'data'])
        .where('resource_id', '=', id)
        .orderBy('seq')
        .execute()
    ).map((e) => ({ type: e.type, data: JSON.parse(e.data) }));
  const jobOf = (id: string) =>
    store.db.selectFrom('jobs').selectAll().where('key', '=', `disk:${id}`).executeTakeFirst();

  it('create inserts, records the created event with the kind’s data, and enqueues the kind’s job', async () => {
    const disk = await newDisk();
    expect(await DISK_KIND.find(store.db, disk.id)).toMatchObject({ status: 'creating', version: 1 });
    expect(await eventsOf(disk.id)).toEqual([
      { type: 'volume.created', data: { volume_id: disk.id, name: disk.name, status: 'creating' } },
    ]);
    expect(await jobOf(disk.id)).toMatchObject({ kind: 'disk', subject_id: disk.id });
  });

  it('act writes the table’s status and the plan’s changes with the event, guarded by version', async () => {
    lifecycle.register(DISK_KIND, new ScriptedReconciler(() => ({ next: 'done' })));
    const disk = await newDisk();
    await jobs.runDue();
    await DISK_KIND.update(store.db, disk, { status: 'available' });
    const attached = await lifecycle.act(DISK_KIND, 'acct_a', disk.id, 'attach', () => ({
      changes: { instance_id: 'ins_1' },
      event: { type: 'volume.attached', data: { instance_id: 'ins_1' } },
      reconcile: false,
    }));
    expect(attached).toMatchObject({ status: 'in-use', instance_id: 'ins_1', version: 3 });
    expect((await eventsOf(disk.id)).at(-1)).toEqual({
      type: 'volume.attached',
      data: { volume_id: disk.id, name: disk.name, status: 'in-use', instance_id: 'ins_1' },
    });
    expect(await jobOf(disk.id)).toBeUndefined();
  });

  it('an action the table does not allow is a conflict naming the status and the allowed ones', async () => {
    const disk = await newDisk();
    const refused = lifecycle.act(DISK_KIND, 'acct_a', disk.id, 'detach', () => ({}));
    await expect(refused).rejects.toBeInstanceOf(Conflict);
    await expect(refused).rejects.toMatchObject({
      message: 'Cannot detach a disk that is creating; allowed from: in-use',
      details: { current_status: 'creating', allowed_statuses: ['in-use'] },
    });
    expect(await DISK_KIND.find(store.db, disk.id)).toMatchObject({ status: 'creating', version: 1 });
  });

  it('another account’s record, or none, is not found', async () => {
    const disk = await newDisk();
    await expect(lifecycle.act(DISK_KIND, 'acct_b', disk.id, 'delete', () => ({}))).rejects.toBeInstanceOf(
      NotFound,
    );
    await expect(lifecycle.act(DISK_KIND, 'acct_a', 'disk_none', 'delete', () => ({}))).rejects.toMatchObject(
      { details: { resource: 'volume', id: 'disk_none' } },
    );
  });

  it('the job carries out the reconciler’s steps: advance, wait, settle with its event', async () => {
    const reconciler = new ScriptedReconciler((disk) => {
      if (disk.status === 'creating' && disk.name.endsWith('-slow') === false) {
        return { next: 'advance', changes: { status: 'detaching' } };
      }
      if (clock.now().getTime() < Date.parse('2026-01-01T00:00:05Z')) {
        return { next: 'wait', until: new Date('2026-01-01T00:00:05Z') };
      }
      return { next: 'settle', changes: { status: 'available' }, event: { type: 'volume.detached' } };
    });
    lifecycle.register(DISK_KIND, reconciler);
    const disk = await newDisk();
    await jobs.runDue();
    expect(reconciler.seen).toEqual(['creating', 'detaching']);
    expect(await jobOf(disk.id)).toMatchObject({ run_at: '2026-01-01T00:00:05.000Z' });
    clock.advance(5_000);
    await jobs.runDue();
    expect(await DISK_KIND.find(store.db, disk.id)).toMatchObject({ status: 'available' });
    expect((await eventsOf(disk.id)).map((e) => `${e.type} ${e.data.status}`)).toEqual([
      'volume.created creating',
      'volume.detached available',
    ]);
    expect(await jobOf(disk.id)).toBeUndefined();
  });

  it('remove deletes the record with its event; a write that lost to another writer looks again', async () => {
    let raced = false;
    const reconciler = new ScriptedReconciler(async (disk) => {
      if (disk.status === 'deleting') return { next: 'remove', event: { type: 'volume.deleted' } };
      if (!raced) {
        // A concurrent writer gets in between this step's read and its write, once.
        raced = true;
        await DISK_KIND.update(store.db, disk, { name: 'renamed' } as never);
      }
      return { next: 'settle', changes: { status: 'available' }, event: { type: 'volume.detached' } };
    });
    lifecycle.register(DISK_KIND, reconciler);
    const disk = await newDisk();
    await jobs.runDue();
    expect(raced).toBe(true);
    const settled = await DISK_KIND.find(store.db, disk.id);
    expect(settled).toMatchObject({ status: 'available', name: 'renamed', version: 3 });
    expect(reconciler.seen).toEqual(['creating', 'creating']);
    await lifecycle.act(DISK_KIND, 'acct_a', disk.id, 'delete', () => ({}));
    await jobs.runDue();
    expect(await DISK_KIND.find(store.db, disk.id)).toBeUndefined();
    expect((await eventsOf(disk.id)).map((e) => e.type)).toEqual([
      'volume.created',
      'volume.detached',
      'volume.deleted',
    ]);
  });

  it('a kind’s refusal explains a refused action in its own words; without one the table’s 409 stands', async () => {
    const explaining: typeof DISK_KIND = {
      ...DISK_KIND,
      refusal: (disk, action) =>
        disk.instance_id
          ? conflict(DISK_STATES, action, disk.status, {
              message: `Disk ${disk.id} is on ${disk.instance_id}`,
              details: { instance_id: disk.instance_id },
            })
          : undefined,
    };
    lifecycle.register(explaining, new ScriptedReconciler(() => ({ next: 'done' })));
    const disk = await newDisk();
    const held = await explaining.update(store.db, disk, { status: 'in-use', instance_id: 'ins_9' });
    await expect(lifecycle.act(explaining, 'acct_a', disk.id, 'attach', () => ({}))).rejects.toMatchObject({
      code: 'conflict',
      message: `Disk ${disk.id} is on ins_9: cannot attach a disk that is in-use; allowed from: available`,
      details: { current_status: 'in-use', allowed_statuses: ['available'], instance_id: 'ins_9' },
    });
    await explaining.update(store.db, held!, { instance_id: null });
    await expect(lifecycle.act(explaining, 'acct_a', disk.id, 'attach', () => ({}))).rejects.toMatchObject({
      message: 'Cannot attach a disk that is in-use; allowed from: available',
    });
  });

  it('holdFirst runs first in the action’s transaction; when it throws, nothing is written', async () => {
    lifecycle.register(DISK_KIND, new ScriptedReconciler(() => ({ next: 'done' })));
    const disk = await newDisk();
    await DISK_KIND.update(store.db, disk, { status: 'available' });
    const order: string[] = [];
    await lifecycle.act(
      DISK_KIND,
      'acct_a',
      disk.id,
      'attach',
      () => {
        order.push('plan');
        return { changes: { instance_id: 'ins_1' } };
      },
      { holdFirst: async () => void order.push('holdFirst') },
    );
    expect(order).toEqual(['holdFirst', 'plan']);
    const before = await DISK_KIND.find(store.db, disk.id);
    const refused = lifecycle.act(DISK_KIND, 'acct_a', disk.id, 'detach', () => ({}), {
      holdFirst: async (ctx) => {
        await DISK_KIND.update(ctx.trx, before!, { instance_id: 'ins_rolled_back' });
        throw new NotFound('instance', 'ins_gone');
      },
    });
    await expect(refused).rejects.toBeInstanceOf(NotFound);
    expect(await DISK_KIND.find(store.db, disk.id)).toEqual(before);
  });

  it('an advance may carry an event: written with the change, and the job looks again', async () => {
    const reconciler = new ScriptedReconciler((disk) =>
      disk.status === 'creating'
        ? { next: 'advance', changes: { status: 'detaching' }, event: { type: 'volume.attached' } }
        : { next: 'settle', changes: { status: 'available' }, event: { type: 'volume.detached' } },
    );
    lifecycle.register(DISK_KIND, reconciler);
    const disk = await newDisk();
    await jobs.runDue();
    expect(reconciler.seen).toEqual(['creating', 'detaching']);
    expect((await eventsOf(disk.id)).map((e) => `${e.type} ${e.data.status}`)).toEqual([
      'volume.created creating',
      'volume.attached detaching',
      'volume.detached available',
    ]);
  });

  it('writeWithin writes a record of the kind inside another transaction, with its event and job, or not at all', async () => {
    lifecycle.register(DISK_KIND, new ScriptedReconciler(() => ({ next: 'done' })));
    const disk = await newDisk();
    await jobs.runDue();
    expect(await jobOf(disk.id)).toBeUndefined();
    // Rolled back with the transaction that made it.
    await expect(
      lifecycle.transaction(async (ctx) => {
        await lifecycle.writeWithin(ctx, DISK_KIND, disk, { status: 'detaching' }, { reconcile: true });
        throw new Error('the outer request failed');
      }),
    ).rejects.toThrow('the outer request failed');
    expect(await DISK_KIND.find(store.db, disk.id)).toMatchObject({ status: 'creating', version: 1 });
    expect(await jobOf(disk.id)).toBeUndefined();
    const written = await lifecycle.transaction((ctx) =>
      lifecycle.writeWithin(
        ctx,
        DISK_KIND,
        disk,
        { status: 'detaching' },
        { event: { type: 'volume.detached' }, reconcile: true },
      ),
    );
    expect(written).toMatchObject({ status: 'detaching', version: 2 });
    expect((await eventsOf(disk.id)).at(-1)).toMatchObject({ type: 'volume.detached' });
    expect(await jobOf(disk.id)).toMatchObject({ kind: 'disk' });
    // Guarded: a second write from the same stale read loses.
    expect(
      await lifecycle.transaction((ctx) =>
        lifecycle.writeWithin(ctx, DISK_KIND, disk, { instance_id: 'ins_late' }),
      ),
    ).toBeUndefined();
  });

  it('a create that names quotas holds its usage back and claims it, guarded, at its end; past the limit nothing is made', async () => {
    // A disk takes one `volumes` (a counted quota); the account has one room left of the free plan's 10.
    const counted: typeof DISK_KIND = { ...DISK_KIND, usage: () => ({ volumes: 1 }) };
    lifecycle.register(counted, new ScriptedReconciler(() => ({ next: 'done' })));
    await store.db
      .insertInto('accounts')
      .values({
        id: 'acct_a',
        name: 'a',
        email: 'a@example.com',
        company: null,
        billing_email: null,
        plan: 'free',
        status: 'active',
        rate_limit_per_hour: null,
        rate_limit_burst: null,
        created_at: clock.now().toISOString(),
        updated_at: clock.now().toISOString(),
      })
      .execute();
    await store.db
      .insertInto('account_usage')
      .values({ account_id: 'acct_a', name: 'volumes', used: 9 })
      .execute();
    const used = async () =>
      Number(
        (
          await store.db
            .selectFrom('account_usage')
            .select('used')
            .where('account_id', '=', 'acct_a')
            .where('name', '=', 'volumes')
            .executeTakeFirstOrThrow()
        ).used,
      );
    const order: string[] = [];
    /** `meanwhile`: what happens in the create's transaction before its end (another create taking room). */
    const create = (id: string, meanwhile?: (trx: Executor) => Promise<unknown>) =>
      lifecycle.create(counted, {
        event: 'volume.created',
        accountId: 'acct_a',
        quotas: [['volumes', 1]],
        hold: async () => void order.push(`hold ${id}`),
        build: async (ctx) => {
          // Held back: inside the create's own transaction the counter has not moved yet.
          const counter = await ctx.trx.selectFrom('account_usage').select('used').executeTakeFirst();
          order.push(`build ${id} at ${counter?.used}`);
          await meanwhile?.(ctx.trx);
          return {
            id,
            account_id: 'acct_a',
            name: id,
            status: 'creating',
            instance_id: null,
            version: 1,
            updated_at: clock.now().toISOString(),
          };
        },
        claim: async () => void order.push(`claim ${id}`),
      });

    // Past the early check, the last room goes to another create before this one's end: the guarded
    // claim refuses it, and nothing of it stays (the other's write was in the same transaction here).
    const raced = create('disk_raced', (trx) =>
      trx.updateTable('account_usage').set({ used: 10 }).where('account_id', '=', 'acct_a').execute(),
    );
    await expect(raced).rejects.toMatchObject({ code: 'quota_exceeded' });
    expect(await counted.find(store.db, 'disk_raced')).toBeUndefined();
    expect(await eventsOf('disk_raced')).toEqual([]);
    expect(await used()).toBe(9);

    order.length = 0;
    await create('disk_fits');
    expect(order).toEqual(['hold disk_fits', 'build disk_fits at 9', 'claim disk_fits']);
    expect(await used()).toBe(10);
    expect(await jobOf('disk_fits')).toMatchObject({ kind: 'disk' });

    // The early check refuses the next one before it is built.
    order.length = 0;
    await expect(create('disk_past')).rejects.toMatchObject({ code: 'quota_exceeded' });
    expect(order).toEqual(['hold disk_past']);
    expect(await used()).toBe(10);

    // Removing the record gives its usage back, in the removal's transaction.
    const made = await counted.find(store.db, 'disk_fits');
    await counted.update(store.db, made!, { status: 'available' });
    const deleting = await lifecycle.act(counted, 'acct_a', 'disk_fits', 'delete', () => ({}));
    await lifecycle.remove(counted, deleting, { type: 'volume.deleted' });
    expect(await used()).toBe(9);
  });

  it('counts a kind keeps move with each write and are written once per transaction, summed, at its end', async () => {
    const writes: Record<string, number>[] = [];
    const counting: typeof DISK_KIND = {
      ...DISK_KIND,
      counts: {
        keyOf: (disk) => disk.status,
        write: async (_trx, changes) => void writes.push(Object.fromEntries(changes)),
      },
    };
    const build = (id: string) => ({
      event: 'volume.created' as const,
      accountId: 'acct_a',
      build: () => ({
        id,
        account_id: 'acct_a',
        name: id,
        status: 'creating' as const,
        instance_id: null,
        version: 1,
        updated_at: clock.now().toISOString(),
      }),
    });
    await lifecycle.transaction(async (ctx) => {
      const first = await lifecycle.createWithin(ctx, counting, build('disk_c1'));
      await lifecycle.createWithin(ctx, counting, build('disk_c2'));
      await lifecycle.writeWithin(ctx, counting, first, { status: 'available' });
      expect(writes).toEqual([]);
    });
    expect(writes).toEqual([{ creating: 1, available: 1 }]);
    // A write that moves no count writes none.
    const disk = await counting.find(store.db, 'disk_c2');
    await lifecycle.transaction((ctx) =>
      lifecycle.writeWithin(ctx, counting, disk!, { instance_id: 'ins_1' }),
    );
    expect(writes).toHaveLength(1);
  });

  it('a part of another create is inserted with its counts, in that transaction, with no event, job or key of its own unless asked', async () => {
    const writes: Record<string, number>[] = [];
    const counting: typeof DISK_KIND = {
      ...DISK_KIND,
      counts: {
        keyOf: (disk) => disk.status,
        write: async (_trx, changes) => void writes.push(Object.fromEntries(changes)),
      },
    };
    const part = (id: string): Disk => ({
      id,
      account_id: 'acct_a',
      name: id,
      status: 'in-use',
      instance_id: 'ins_parent',
      version: 1,
      updated_at: clock.now().toISOString(),
    });
    await lifecycle.transaction(async (ctx) => {
      await lifecycle.createPartWithin(ctx, counting, { record: part('disk_p1') });
      await lifecycle.createPartWithin(ctx, counting, { record: part('disk_p2'), reconcile: true });
    });
    expect(await counting.find(store.db, 'disk_p1')).toMatchObject({ status: 'in-use', version: 1 });
    expect(writes).toEqual([{ 'in-use': 2 }]);
    expect(await eventsOf('disk_p1')).toEqual([]);
    expect(await eventsOf('disk_p2')).toEqual([]);
    expect(await jobOf('disk_p1')).toBeUndefined();
    expect(await jobOf('disk_p2')).toMatchObject({ kind: 'disk', subject_id: 'disk_p2' });
    // Rolled back with the parent's transaction.
    await expect(
      lifecycle.transaction(async (ctx) => {
        await lifecycle.createPartWithin(ctx, counting, { record: part('disk_p3') });
        throw new Error('the parent failed');
      }),
    ).rejects.toThrow('the parent failed');
    expect(await counting.find(store.db, 'disk_p3')).toBeUndefined();
  });

  it('a step that keeps throwing ends in what giveUp says, after the runner’s attempts', async () => {
    lifecycle.register(
      DISK_KIND,
      new ScriptedReconciler(() => {
        throw new Error('driver down');
      }),
    );
    const disk = await newDisk();
    for (let attempt = 0; attempt < 12 && (await jobOf(disk.id)); attempt++) {
      await jobs.runDue();
      clock.advance(60_000);
    }
    expect(await DISK_KIND.find(store.db, disk.id)).toMatchObject({ status: 'error' });
    expect(await jobOf(disk.id)).toBeUndefined();
  });
});
