/**
 * The volume state machine, as data (docs/design.md, "Volume states"). Each action says from which statuses it may
 * start and which status it writes at once; the reconciler (resources/volumes/reconciler.ts) walks the
 * transitional statuses to where they lead. Diagram: docs/api.md, "Volumes".
 *
 *   create ─▶ creating ─▶ available ─attach─▶ attaching ─▶ in-use ─detach─▶ detaching ─▶ available
 *               └─(created with instance_id)─▶ attaching
 *   available | in-use ─resize─▶ resizing ─▶ where it was (in-use while attached: online)
 *   available | error ─delete─▶ deleting ─▶ (gone: 404)
 *   available (detached) | in-use (root, instance stopped) ─restore─▶ restoring ─▶ where it was
 *   the driver keeps failing ─▶ error
 */

import { defineStateTable, statusesExcept } from '../../platform/lifecycle/state-table.js';
import type { VOLUME_EVENTS } from './events.js';

export const VOLUME_STATUSES = [
  'creating',
  'available',
  'attaching',
  'in-use',
  'detaching',
  'resizing',
  'deleting',
  'restoring',
  'error',
] as const;
export type VolumeStatus = (typeof VOLUME_STATUSES)[number];

export type VolumeAction = 'attach' | 'detach' | 'resize' | 'update' | 'delete' | 'restore';

export const VOLUME_STATES = defineStateTable<VolumeStatus, VolumeAction>({
  kind: 'volume',
  statuses: VOLUME_STATUSES,
  create: { status: 'creating', target: 'available' },
  actions: {
    attach: {
      from: ['available'],
      to: 'attaching',
      target: 'in-use',
      description:
        'Also refused for a root volume (it stays on its instance), for a volume already on an instance, and onto an instance that is deleting or has no free device.',
    },
    // From error too, when the failure left it on an instance.
    detach: {
      from: ['in-use', 'error'],
      to: 'detaching',
      target: 'available',
      description:
        'Also refused for a root volume (it goes with its instance) and for a volume on no instance.',
    },
    // Back to available or in-use, whichever it left: an attached volume grows online.
    resize: {
      from: ['available', 'in-use'],
      to: 'resizing',
      description: 'Also refused for a root volume: resize its instance instead.',
    },
    update: { from: statusesExcept(VOLUME_STATUSES, 'deleting') },
    delete: {
      from: ['available', 'error'],
      to: 'deleting',
      target: 'gone',
      description:
        'Also refused for a root volume (it goes with its instance) and for a volume still on an instance: detach it first.',
    },
    // A snapshot written over the disk: a detached data volume, or the root volume of a stopped instance
    // (in-use; the snapshot service checks the instance). Back where it was when done.
    restore: {
      from: ['available', 'in-use'],
      to: 'restoring',
      description:
        'A data volume is restored over while detached (available); from in-use only the root volume of a stopped instance.',
    },
  },
});

export type VolumeEventType = keyof typeof VOLUME_EVENTS;
