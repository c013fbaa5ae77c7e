/**
 * Who an event is written for (docs/design.md, "Audit"): the API key and client address of a request, the
 * operator running an admin command, or the platform itself.
 *
 * This is the one implicit channel of the actor. It is known at the edge (the HTTP layer knows the key
 * and the address; the admin CLI knows it is the operator) and needed at the bottom (platform/events/outbox.ts,
 * inside transactions some fifteen services open), and every path between them would otherwise take one
 * more parameter that none of them uses. It carries the actor only: nothing that decides anything.
 *
 * Absent, the actor is the system. Background work must say so itself (`asSystem`) where it may start
 * inside a request: a timer or promise chain started there inherits the request's context, so the job
 * runner woken by a create would otherwise write the boot's events in the creator's name.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export type Actor = { type: 'api_key'; id: string; ip: string } | { type: 'operator' } | { type: 'system' };

export const SYSTEM: Actor = Object.freeze({ type: 'system' });
export const OPERATOR: Actor = Object.freeze({ type: 'operator' });

const current = new AsyncLocalStorage<Actor>();

/** The actor of the work running now; the system when nobody set one. */
export function currentActor(): Actor {
  return current.getStore() ?? SYSTEM;
}

/** Runs `work` (and everything it starts) on behalf of `actor`. */
export function actingAs<T>(actor: Actor, work: () => T): T {
  return current.run(actor, work);
}

/** Runs `work` as the platform's own, whoever's context it was started in. */
export function asSystem<T>(work: () => T): T {
  return current.run(SYSTEM, work);
}
