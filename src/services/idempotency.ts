/**
 * Idempotency-Key handling for POST requests, per account, kept in the store for 24 hours so a replay
 * works after a restart and on any replica.
 *
 * The first request with a key claims it (an insert that only one caller can win) and runs; its
 * response is then saved. A later request with the same key and the same fingerprint gets the saved
 * response; with a different fingerprint, IdempotencyKeyReused; while the first is still running,
 * IdempotencyKeyInUse. A claim carries a lease: if its process dies mid-request, the key can be claimed
 * again once the lease lapses. Responses with a 5xx status are not saved, so the client can retry.
 */
import type { Clock } from '../domain/clock.js';
import type { Store } from '../store/db.js';
import * as records from '../store/idempotency.js';
import { IdempotencyKeyInUse, IdempotencyKeyReused } from './errors.js';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
const LEASE_MS = 60_000;

export type IdempotencyOutcome = { kind: 'proceed' } | { kind: 'replay'; status: number; body: string };

export class IdempotencyService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
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
    };
    const db = this.store.db;
    if (await records.claimIdempotencyKey(db, record)) return { kind: 'proceed' };
    if (await records.takeOverIdempotencyKey(db, record, record.created_at)) return { kind: 'proceed' };
    const existing = await records.findIdempotencyKey(db, accountId, key);
    // Deleted between our claim and our read (its request ended in a 5xx): claim it afresh.
    if (!existing)
      return (await records.claimIdempotencyKey(db, record))
        ? { kind: 'proceed' }
        : this.begin(accountId, key, fingerprint);
    if (existing.fingerprint !== fingerprint) throw new IdempotencyKeyReused();
    if (existing.state === 'in_progress') throw new IdempotencyKeyInUse();
    return { kind: 'replay', status: existing.response_status ?? 200, body: existing.response_body ?? '' };
  }

  async finish(accountId: string, key: string, status: number, body: string): Promise<void> {
    if (status >= 500) {
      await records.releaseIdempotencyKey(this.store.db, accountId, key);
    } else {
      await records.completeIdempotencyKey(this.store.db, accountId, key, status, body);
    }
  }

  purgeExpired(): Promise<void> {
    return records.purgeExpiredIdempotencyKeys(this.store.db, this.clock.now().toISOString());
  }
}
