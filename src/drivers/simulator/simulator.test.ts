/**
 * The simulated driver on its own, over a real SQLite store and a manual clock: timings, faults, the
 * idempotence the reconciler relies on, and deterministic metrics.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../platform/domain/clock.js';
import { migrateToLatest, openStore, type Store } from '../../platform/store/db.js';
import { INSTANCE_TYPES } from '../../resources/catalog/catalog.js';
import { MIGRATIONS } from '../../resources.js';
import type { MachineSpec, VolumeSpec } from '../driver.js';
import { FAULT_TAG, SimulatedDriver } from './simulator.js';

const typeNamed = (name: string) => {
  const found = INSTANCE_TYPES.find((t) => t.name === name);
  if (!found) throw new Error(name);
  return found;
};

let counter = 0;
function spec(overrides: Partial<MachineSpec> = {}): MachineSpec {
  counter += 1;
  return {
    id: `ins_sim${counter}`,
    instanceType: typeNamed('compute-2x'),
    image: 'ubuntu-24.04',
    region: 'us-east-1',
    userData: null,
    tags: {},
    ...overrides,
  };
}

describe('SimulatedDriver', () => {
  let dataDir = '';
  let store: Store;
  let clock: ManualClock;
  let driver: SimulatedDriver;

  beforeEach(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-sim-'));
    store = openStore({ dataDir });
    await migrateToLatest(store.db, MIGRATIONS);
    clock = new ManualClock();
    driver = await SimulatedDriver.open({ db: store.db, clock, speedup: 1 });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const power = async (machine: MachineSpec) => (await driver.inspect(machine)).power;

  it('provisions off, boots in 8 s, stops gracefully in 5 s; repeated calls change nothing', async () => {
    const machine = spec();
    expect(await power(machine)).toBe('absent');
    await driver.provision(machine);
    await driver.provision(machine);
    expect(await power(machine)).toBe('off');

    const bootAt = clock.now().getTime();
    await driver.start(machine);
    clock.advance(4_000);
    await driver.start(machine); // already booting: the boot does not begin again
    const booting = await driver.inspect(machine);
    expect(booting.power).toBe('booting');
    expect(booting.settlesAt?.getTime()).toBe(bootAt + 8_000);
    clock.advance(4_000);
    expect(await power(machine)).toBe('running');

    await driver.stop(machine, { force: false });
    clock.advance(4_999);
    expect(await power(machine)).toBe('stopping');
    clock.advance(1);
    expect(await power(machine)).toBe('off');
  });

  it('reboots through stopping and booting, and records when the new boot began', async () => {
    const machine = spec();
    await driver.provision(machine);
    await driver.start(machine);
    clock.advance(8_000);
    const askedAt = clock.now().getTime();
    await driver.reboot(machine);
    expect((await driver.inspect(machine)).bootStartedAt?.getTime()).toBe(askedAt + 5_000);
    clock.advance(2_000);
    expect(await power(machine)).toBe('stopping');
    clock.advance(3_000);
    expect(await power(machine)).toBe('booting');
    clock.advance(8_000);
    expect(await power(machine)).toBe('running');
  });

  it('resizes an off machine in 25 s and refuses to resize a running one', async () => {
    const machine = spec();
    await driver.provision(machine);
    const bigger = { ...machine, instanceType: typeNamed('compute-4x') };
    await driver.resize(bigger);
    expect((await driver.inspect(bigger)).power).toBe('resizing');
    clock.advance(25_000);
    expect(await driver.inspect(bigger)).toMatchObject({ power: 'off', instanceType: 'compute-4x' });
    await driver.start(bigger);
    await expect(driver.resize({ ...machine, instanceType: typeNamed('compute-8x') })).rejects.toThrow(
      /must be off/,
    );
  });

  it('divides every duration by the speed-up', async () => {
    const fast = await SimulatedDriver.open({ db: store.db, clock, speedup: 1000 });
    const machine = spec();
    await fast.provision(machine);
    await fast.start(machine);
    clock.advance(7);
    expect((await fast.inspect(machine)).power).toBe('booting');
    clock.advance(1);
    expect((await fast.inspect(machine)).power).toBe('running');
  });

  it('hangs a boot while stuck-starting is set, and finishes it once the tag is gone', async () => {
    const stuck = spec({ tags: { [FAULT_TAG]: 'stuck-starting' } });
    await driver.provision(stuck);
    await driver.start(stuck);
    clock.advance(3_600_000);
    expect(await driver.inspect(stuck)).toMatchObject({ power: 'booting', settlesAt: null });
    expect((await driver.inspect({ ...stuck, tags: {} })).power).toBe('running');
  });

  it('hangs a graceful stop with stuck-stopping; a forced stop is immediate', async () => {
    const stuck = spec({ tags: { [FAULT_TAG]: 'stuck-stopping' } });
    await driver.provision(stuck);
    await driver.start(stuck);
    clock.advance(8_000);
    await driver.stop(stuck, { force: false });
    clock.advance(3_600_000);
    expect(await driver.inspect(stuck)).toMatchObject({ power: 'stopping', settlesAt: null });
    await driver.stop(stuck, { force: true });
    expect(await power(stuck)).toBe('off');
  });

  it('fails a boot with boot-error; a new start boots again', async () => {
    const failing = spec({ tags: { [FAULT_TAG]: 'boot-error' } });
    await driver.provision(failing);
    await driver.start(failing);
    clock.advance(8_000);
    expect(await power(failing)).toBe('failed');
    const healed = { ...failing, tags: {} };
    await driver.start(healed);
    clock.advance(8_000);
    expect(await power(healed)).toBe('running');
  });

  it('destroys a machine, and destroying it again is fine', async () => {
    const machine = spec();
    await driver.provision(machine);
    await driver.destroy(machine);
    await driver.destroy(machine);
    expect(await power(machine)).toBe('absent');
  });

  it('samples metrics deterministically: zero when not running, gpu_percent on GPU types only', async () => {
    const cpu = spec();
    const gpu = spec({ instanceType: typeNamed('gpu-1x'), image: 'ubuntu-22.04-cuda' });
    for (const machine of [cpu, gpu]) {
      await driver.provision(machine);
      await driver.start(machine);
    }
    const atBoot = clock.now();
    const idle = await driver.sampleMetrics(cpu, atBoot);
    expect(idle).toMatchObject({ cpu_percent: 0, memory_used_bytes: 0, net_rx_bps: 0 });
    clock.advance(8_000);
    const at = new Date(clock.now().getTime() + 3_000);
    const sample = await driver.sampleMetrics(cpu, at);
    expect(sample.timestamp).toBe(new Date(Math.floor(at.getTime() / 1_000) * 1_000).toISOString());
    expect(sample.cpu_percent).toBeGreaterThan(0);
    expect(sample.cpu_percent).toBeLessThanOrEqual(100);
    expect(sample.memory_used_bytes).toBeLessThanOrEqual(4 * 1024 ** 3);
    expect(sample).not.toHaveProperty('gpu_percent');
    // The same question always gets the same answer (any replica, any time it is asked).
    expect(await driver.sampleMetrics(cpu, at)).toEqual(sample);
    // Another second is another sample.
    expect(await driver.sampleMetrics(cpu, new Date(at.getTime() + 1_000))).not.toEqual(sample);
    const gpuSample = await driver.sampleMetrics(gpu, at);
    expect(gpuSample.gpu_percent).toBeGreaterThan(0);
  });

  it('samples many machines in one go exactly as one by one: running, booting, stopped, faulty, absent', async () => {
    const gpuType = { instanceType: typeNamed('gpu-1x'), image: 'ubuntu-22.04-cuda' };
    const running = [spec(), spec(), spec(gpuType), spec({ tags: { [FAULT_TAG]: 'stuck-stopping' } })];
    const [booting, stopped, stuck] = [spec(), spec(), spec({ tags: { [FAULT_TAG]: 'stuck-starting' } })];
    // Machines that do not exist (more than one query's worth of ids in all).
    const absent = Array.from({ length: 600 }, (_, i) => spec(i % 2 === 0 ? gpuType : {}));
    for (const machine of [...running, booting, stopped, stuck]) await driver.provision(machine);
    for (const machine of [...running, stuck]) await driver.start(machine);
    clock.advance(8_000);
    await driver.start(booting);
    const all = [...absent.slice(0, 300), ...running, booting, stopped, stuck, ...absent.slice(300)];
    for (const at of [clock.now(), new Date(clock.now().getTime() + 2_500)]) {
      const many = await driver.sampleMetricsMany(all, at);
      expect(many.size).toBe(all.length);
      for (const machine of all)
        expect(many.get(machine.id)).toEqual(await driver.sampleMetrics(machine, at));
      for (const machine of running) expect(many.get(machine.id)).not.toMatchObject({ cpu_percent: 0 });
      for (const machine of [booting, stopped, stuck, absent[0]!]) {
        expect(many.get(machine.id)).toMatchObject({ cpu_percent: 0, memory_used_bytes: 0 });
      }
    }
  });

  describe('disks', () => {
    let disks = 0;
    const disk = (overrides: Partial<VolumeSpec> = {}): VolumeSpec => {
      disks += 1;
      return { id: `vol_sim${disks}`, region: 'us-east-1', sizeGb: 10, filesystem: null, ...overrides };
    };
    const stateOf = async (volume: VolumeSpec) => (await driver.inspectVolume(volume)).state;
    const attachment = { instanceId: 'ins_a', deviceName: '/dev/vdb' };

    it('creates in 4 s (7 s formatted), attaches and detaches in 2 s; repeated calls change nothing', async () => {
      const raw = disk();
      const formatted = disk({ filesystem: 'ext4' });
      expect(await stateOf(raw)).toBe('absent');
      await driver.createVolume(raw);
      await driver.createVolume(formatted);
      clock.advance(2_000);
      await driver.createVolume(raw);
      expect((await driver.inspectVolume(raw)).settlesAt?.getTime()).toBe(clock.now().getTime() + 2_000);
      clock.advance(2_000);
      expect(await stateOf(raw)).toBe('available');
      expect(await stateOf(formatted)).toBe('creating');
      clock.advance(3_000);
      expect(await stateOf(formatted)).toBe('available');

      await driver.attachVolume(raw, attachment);
      clock.advance(1_000);
      await driver.attachVolume(raw, attachment);
      expect(await stateOf(raw)).toBe('attaching');
      clock.advance(1_000);
      expect(await driver.inspectVolume(raw)).toMatchObject({ state: 'attached', attachment });
      await driver.detachVolume(raw);
      await driver.detachVolume(raw);
      clock.advance(2_000);
      expect(await driver.inspectVolume(raw)).toMatchObject({ state: 'available', attachment: null });
      await driver.detachVolume(raw);
      expect(await stateOf(raw)).toBe('available');
    });

    it('grows online in 6 s, keeping the attachment; a smaller or equal size changes nothing', async () => {
      const volume = disk();
      await driver.createVolume(volume);
      clock.advance(4_000);
      await driver.attachVolume(volume, attachment);
      clock.advance(2_000);
      await driver.resizeVolume({ ...volume, sizeGb: 10 });
      expect(await stateOf(volume)).toBe('attached');
      await driver.resizeVolume({ ...volume, sizeGb: 30 });
      expect(await driver.inspectVolume(volume)).toMatchObject({ state: 'resizing', sizeGb: 30, attachment });
      clock.advance(6_000);
      expect(await driver.inspectVolume(volume)).toMatchObject({ state: 'attached', sizeGb: 30, attachment });
    });

    it('deletes a detached disk in 3 s, then purges it; refuses to delete an attached one', async () => {
      const volume = disk();
      await driver.createVolume(volume);
      clock.advance(4_000);
      await driver.attachVolume(volume, attachment);
      await expect(driver.deleteVolume(volume)).rejects.toThrow(/attached/);
      await driver.detachVolume(volume);
      clock.advance(4_000);
      await driver.deleteVolume(volume);
      await driver.deleteVolume(volume);
      expect(await stateOf(volume)).toBe('deleting');
      clock.advance(3_000);
      expect(await stateOf(volume)).toBe('deleted');
      await driver.deleteVolume(volume);
      expect(await stateOf(volume)).toBe('absent');
      await driver.deleteVolume(volume);
    });

    it('keeps disks in its own table, so a new driver over the same store finds them where they were', async () => {
      const volume = disk();
      await driver.createVolume(volume);
      const reopened = await SimulatedDriver.open({ db: store.db, clock, speedup: 1 });
      clock.advance(4_000);
      expect((await reopened.inspectVolume(volume)).state).toBe('available');
    });
  });
});
