/**
 * The request's Idempotency-Key claim, visible to the transaction that commits what the request makes.
 *
 * Why: the answer to a keyed create is saved when it is sent, after the create's COMMIT. A process that
 * dies between the two left the key claimed with nothing saved, and the retry ran the create again
 * once the claim's lease lapsed (two instances, both billed). So every create a keyed request makes
 * records, in its own transaction, that the key is `committed` with what it made (resource kind and id,
 * and the status the route answers): the record commits or rolls back with the create, and a retry
 * after any crash finds it and replays the resource as it is now (plugins/idempotency.ts).
 *
 * How: the idempotency plugin runs the handler of a route that makes something (route config
 * `idempotentCreate`) inside `runWithClaim`, an AsyncLocalStorage scope of its own (unrelated to any
 * other request context); `recordCreated(trx, kind, id)` is called in the transaction that inserts the
 * record: by the lifecycle core's `create` for stateful kinds, by the service for the others. Outside such a scope (no key, another route, background work) it does nothing. A claim
 * closes when the request's answer is settled, so work that outlives the request in its async context
 * (timers armed by it) cannot mark it. If the claim no longer holds the key (its lease lapsed and a
 * retry took it over), `recordCreated` throws IdempotencyKeyInUse and the create rolls back: one
 * create per key, whatever the timing.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { IdempotencyKeyInUse, type ResourceKind } from '../errors.js';
import type { Executor } from '../store/schema.js';
import { type IdempotencyClaim, markIdempotencyKeyCommitted } from './store.js';

/** A keyed request to a route that makes something, while its handler runs. */
export interface CreateClaim {
  claim: IdempotencyClaim;
  /** The status the route answers a successful create with. */
  status: number;
  /** False once the request's answer is settled. */
  open: boolean;
}

/** What a create made, as the idempotency record names it. */
export interface MadeResource {
  kind: ResourceKind;
  id: string;
}

const scope = new AsyncLocalStorage<CreateClaim>();

/** Runs `work` (the request's handler, and everything it awaits) with `claim` as the request's claim. */
export function runWithClaim<T>(claim: CreateClaim, work: () => T): T {
  return scope.run(claim, work);
}

/**
 * Inside the transaction that inserts it: the keyed request being served made `kind` `id`. Call it once
 * per request-driven create, with the record the route answers about.
 */
export async function recordCreated(trx: Executor, kind: ResourceKind, id: string): Promise<void> {
  const current = scope.getStore();
  if (!current?.open) return;
  const marked = await markIdempotencyKeyCommitted(trx, current.claim, { status: current.status, kind, id });
  if (!marked) throw new IdempotencyKeyInUse();
}
