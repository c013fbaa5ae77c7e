/** The volume state table and device names, as properties over any status, action and set of devices. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isAllowed, statusAfter } from '../../platform/lifecycle/state-table.js';
import { DATA_DEVICES, lowestFreeDevice, MAX_DATA_VOLUMES_PER_INSTANCE, ROOT_DEVICE } from './record.js';
import { VOLUME_STATES, VOLUME_STATUSES, type VolumeAction } from './states.js';

const ACTIONS = Object.keys(VOLUME_STATES.actions) as VolumeAction[];
const anyStatus = fc.constantFrom(...VOLUME_STATUSES);
const anyAction = fc.constantFrom(...ACTIONS);

describe('the volume state table', () => {
  it('an allowed action writes a status of the table; a refused one starts from none of its statuses', () => {
    fc.assert(
      fc.property(anyStatus, anyAction, (status, action) => {
        if (isAllowed(VOLUME_STATES, action, status)) {
          expect(VOLUME_STATUSES).toContain(statusAfter(VOLUME_STATES, action, status));
        } else {
          expect(VOLUME_STATES.actions[action].from).not.toContain(status);
        }
      }),
    );
  });

  it('only an available volume can be attached, and only a volume holding no device can be deleted', () => {
    fc.assert(
      fc.property(anyStatus, (status) => {
        expect(isAllowed(VOLUME_STATES, 'attach', status)).toBe(status === 'available');
        // Statuses in which a volume is on, or moving on or off, an instance.
        if (isAllowed(VOLUME_STATES, 'delete', status)) {
          expect(['attaching', 'in-use', 'detaching', 'resizing']).not.toContain(status);
        }
      }),
    );
  });

  it('every accepted action but update moves the volume into a transitional status; nothing leaves deleting', () => {
    fc.assert(
      fc.property(anyStatus, anyAction, (status, action) => {
        if (!isAllowed(VOLUME_STATES, action, status)) return;
        expect(status).not.toBe('deleting');
        const next = statusAfter(VOLUME_STATES, action, status);
        if (action === 'update') expect(next).toBe(status);
        else expect(['attaching', 'detaching', 'resizing', 'deleting', 'restoring']).toContain(next);
      }),
    );
  });
});

describe('device names', () => {
  const anyUsed = fc.subarray([...DATA_DEVICES, ROOT_DEVICE, null, '/dev/sdz']);

  it('the lowest free device is a data device not in use, and no lower one is free', () => {
    fc.assert(
      fc.property(anyUsed, (used) => {
        const device = lowestFreeDevice(used);
        const free = DATA_DEVICES.filter((d) => !used.includes(d));
        if (free.length === 0) {
          expect(device).toBeNull();
          return;
        }
        expect(device).toBe(free[0]);
        expect(device).not.toBe(ROOT_DEVICE);
      }),
    );
  });

  it('handing devices out one by one gives /dev/vdb…/dev/vdq, distinct, then none', () => {
    const given: string[] = [];
    for (let i = 0; i < MAX_DATA_VOLUMES_PER_INSTANCE; i++) given.push(lowestFreeDevice(given) as string);
    expect(given[0]).toBe('/dev/vdb');
    expect(given.at(-1)).toBe('/dev/vdq');
    expect(new Set(given).size).toBe(MAX_DATA_VOLUMES_PER_INSTANCE);
    expect(lowestFreeDevice(given)).toBeNull();
  });

  it('a freed device is handed out again before any higher one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_DATA_VOLUMES_PER_INSTANCE - 1 }), (freed) => {
        const used = DATA_DEVICES.filter((_, i) => i !== freed);
        expect(lowestFreeDevice(used)).toBe(DATA_DEVICES[freed]);
      }),
    );
  });
});
