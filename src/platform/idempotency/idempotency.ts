/**
 * Idempotency-Key handling for POST requests, per account, kept in the store for 24 hours so a replay
 * works after a restart and on any replica.
 *
 * The first request with a key claims it (an insert that only one caller can win) and runs; its
 * response is then saved. A later request with the same key and the same fingerprint gets the saved
 * response; with a different fingerprint, IdempotencyKeyReused; while the first is still running,
 * IdempotencyKeyInUse. A claim carries a lease: if its process dies mid-request, the key can be claimed
 * again once the lease lapses. Responses with a 5xx status are not saved, so the client can retry.
 *
 * A create also marks the key `committed` with what it made, in its own transaction
 * (idempotency-context.ts). Such a key is never claimed again: a retry that finds it with no answer
 * saved (the process died after the COMMIT) gets the resource as it is now, and a failure after the
 * COMMIT does not free it.
 */
import type { Clock } from '../domain/clock.js';
import { newId } from '../domain/ids.js';
import { IdempotencyKeyInUse, IdempotencyKeyReused, type ResourceKind } from '../errors.js';
import type { Store } from '../store/db.js';
import type { MadeResource } from './context.js';
import * as records from './store.js';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
const LEASE_MS = 60_000;

export type IdempotencyOutcome =
  | { kind: 'proceed'; claim: records.IdempotencyClaim }
  /** The saved answer; `made` names what a create made (null for other requests and older records). */
  | { kind: 'replay'; status: number; body: string; made: MadeResource | null }
  /** A create that committed without its answer saved: answer `status` with the resource as it is now. */
  | { kind: 'rebuild'; status: number; made: MadeResource };

export interface IdempotencyOptions {
  /**
   * Tests only (NIMBUS_TEST_CRASH_AFTER_COMMIT, refused unless NODE_ENV=test): the process kills itself
   * (SIGKILL) when a request that claimed a key is about to save its answer — after the request's
   * transaction committed, before the answer is saved or sent — so a test can retry into that window.
   */
  crashBeforeSavingAnswer?: boolean;
}

export class IdempotencyService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: IdempotencyOptions = {},
  ) {}

  async begin(accountId: string, key: string, fingerprint: string): Promise<IdempotencyOutcome> {
    const now = this.clock.now();
    const record: records.IdempotencyRecord = {
      account_id: accountId,
      key,
      fingerprint,
      state: 'in_progress',
      response_status: null,
      response_body: null,
      locked_until: new Date(now.getTime() + LEASE_MS).toISOString(),
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS).toISOString(),
      claimed_by: newId('request', now),
      resource_kind: null,
      resource_id: null,
    };
    const claim = { accountId, key, claimedBy: record.claimed_by as string };
    const db = this.store.db;
    if (await records.claimIdempotencyKey(db, record)) return { kind: 'proceed', claim };
    if (await records.takeOverIdempotencyKey(db, record, record.created_at))
      return { kind: 'proceed', claim };
    const existing = await records.findIdempotencyKey(db, accountId, key);
    // Deleted between our claim and our read (its request ended in a 5xx): claim it afresh.
    if (!existing)
      return (await records.claimIdempotencyKey(db, record))
        ? { kind: 'proceed', claim }
        : this.begin(accountId, key, fingerprint);
    if (existing.fingerprint !== fingerprint) throw new IdempotencyKeyReused();
    const made =
      existing.resource_kind !== null && existing.resource_id !== null
        ? { kind: existing.resource_kind as ResourceKind, id: existing.resource_id }
        : null;
    if (existing.state === 'in_progress') throw new IdempotencyKeyInUse();
    if (existing.state === 'committed' && made) {
      return { kind: 'rebuild', status: existing.response_status ?? 200, made };
    }
    return {
      kind: 'replay',
      status: existing.response_status ?? 200,
      body: existing.response_body ?? '',
      made,
    };
  }

  /** Saves the claim's answer (or frees the key after a 5xx, unless a create committed under it). */
  async finish(claim: records.IdempotencyClaim, status: number, body: string): Promise<void> {
    if (this.options.crashBeforeSavingAnswer) process.kill(process.pid, 'SIGKILL');
    if (status >= 500) {
      await records.releaseIdempotencyKey(this.store.db, claim);
    } else {
      await records.completeIdempotencyKey(this.store.db, claim, status, body);
    }
  }

  purgeExpired(): Promise<void> {
    return records.purgeExpiredIdempotencyKeys(this.store.db, this.clock.now().toISOString());
  }
}
