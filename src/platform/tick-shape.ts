/**
 * Keeps `process.nextTick` on V8's fast path for the life of the process.
 *
 * Node builds every queued tick as an object literal whose first two keys are computed (symbols). For
 * such keys V8 remembers, per key, the shape the object had when it was first seen there, and the first
 * time it sees another shape it gives up on that key for good: from then on every nextTick defines its
 * properties through V8's runtime instead of compiled code. The remembered shapes are held weakly, so a
 * full garbage collection that runs while no tick is queued frees them, and the next tick is built on
 * fresh shapes that no longer match. A server whose heap grows enough for full collections (Nimbus,
 * within seconds of load) pays that for every one of the eight or so ticks Node's HTTP and stream code
 * queue per request: a build without this module needed 10.8% more CPU per request than one with it
 * (bench/compare.mjs, 2026-11-25, Node 20.20.2; docs/benchmarks.md). Its test reports whether a given
 * Node still needs it.
 *
 * One tick object held for ever keeps its shape, and the shapes its literal passes through on the way,
 * alive. An async hook's init callback is the only public way to reach a tick object, so one is enabled
 * for a single nextTick and disabled again at once.
 */
import { createHook } from 'node:async_hooks';

let retained: object | undefined;

/**
 * Call once, as early as possible: a full collection before the call may already have done the damage.
 * Returns false when Node reported no tick object (a Node whose ticks are built differently).
 */
export function retainTickObjectShape(): boolean {
  if (retained !== undefined) return true;
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject') retained ??= resource;
    },
  });
  hook.enable();
  try {
    process.nextTick(() => {});
  } finally {
    hook.disable();
  }
  return retained !== undefined;
}
