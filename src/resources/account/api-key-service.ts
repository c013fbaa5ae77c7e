/**
 * API keys: minting, listing, revoking, and verifying a presented key.
 *
 * Keys are `nmb_` + 32 random bytes in base62. Only their SHA-256 is stored. Verification hashes the
 * presented key and looks the hash up; a verified key is then kept in memory for `cacheMs` so the hot
 * path costs one hash and one map lookup. Revocation drops the entry at once on this replica and
 * broadcasts the hash so other replicas drop it too; if a notice is missed, the entry still expires
 * after `cacheMs`. Expiry (`expires_at`) is checked on every request, cached or not. Whatever holds a
 * key for longer than a request (an open metric stream) learns of each invalidation (onInvalidation)
 * and verifies again by the key's hash (authenticateHash).
 */
import { hash, randomBytes } from 'node:crypto';
import { type Authenticator, UnverifiedKey } from '../../platform/authenticator.js';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import type { PageRequest } from '../../platform/domain/pagination.js';
import { allows, isKnownPermission, normalizePermissions } from '../../platform/domain/permissions.js';
import { isPrintableName, PRINTABLE_NAME_RULE } from '../../platform/domain/validation.js';
import { AuthenticationFailed, Forbidden, InvalidRequest, NotFound } from '../../platform/errors.js';
import type { Broadcaster } from '../../platform/events/broadcast.js';
import { recordEvent } from '../../platform/events/outbox.js';
import { recordCreated } from '../../platform/idempotency/context.js';
import type { Principal } from '../../platform/principal.js';
import type { QuotaService } from '../../platform/quotas/quotas.js';
import { rateLimitPolicyOf } from '../../platform/rate-limits/rate-limits.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { grantedExpiry, permissionsBeyond, revocationBlockers } from './api-key-rules.js';
import * as keys from './api-key-store.js';
import { type ApiKeyView, apiKeyView } from './api-key-view.js';
import { lockAccount } from './store.js';
import { accountView } from './view.js';

export const KEY_PREFIX = 'nmb_';
const MAX_KEY_LENGTH = 200;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const INVALIDATE_CHANNEL = 'auth.invalidate';
const LAST_USED_FLUSH_MS = 15_000;
export const ROTATION_RECOMMENDED_DAYS = 90;

export type { ApiKeyView };

export interface CreatedApiKey extends ApiKeyView {
  /** The key itself; returned once, at creation. */
  key: string;
}

export interface NewApiKey {
  name: string;
  permissions?: string[] | undefined;
  expires_at?: string | undefined;
}

function toBase62(bytes: Buffer): string {
  let value = BigInt(`0x${bytes.toString('hex')}`);
  let out = '';
  while (value > 0n) {
    out = BASE62[Number(value % 62n)] + out;
    value /= 62n;
  }
  // 32 bytes need at most 43 base62 digits; pad so every key has the same length.
  return out.padStart(43, '0');
}

export function hashKey(key: string): string {
  // One-shot hash: the same digest as createHash().update().digest(), at a third of the cost, and
  // every authenticated request hashes the key it presents.
  return hash('sha256', key, 'hex');
}

const view = (row: keys.ApiKey): ApiKeyView => apiKeyView(row);

/** Keys that cannot be ours are refused before any hashing. */
function isPlausibleKey(presented: string): boolean {
  return presented.startsWith(KEY_PREFIX) && presented.length <= MAX_KEY_LENGTH;
}

function isExpired(principal: Principal, nowMs: number): boolean {
  return principal.keyExpiresAt !== null && principal.keyExpiresAt.getTime() <= nowMs;
}

interface CacheEntry {
  principal: Principal;
  cachedAtMs: number;
}

/** What an invalidation dropped from the cache: one key (revoked) or every key of an account. */
export type Invalidation = { keyHash: string } | { accountId: string };

export class ApiKeyService implements Authenticator {
  private readonly cache = new Map<string, CacheEntry>();
  /**
   * Counts invalidations. A request that missed the cache caches what it read only if no invalidation
   * happened meanwhile: otherwise a key revoked while it was being read could be cached again.
   */
  private invalidations = 0;
  /** Key id → last use (epoch ms); turned into timestamps only when flushed, not on every request. */
  private readonly pendingLastUsed = new Map<string, number>();
  /** The last flush of last-used times started (settled: it never rejects). */
  private flushing: Promise<void> = Promise.resolve();
  private readonly flusher: NodeJS.Timeout;
  /** Told of every invalidation, local or from another replica (open metric streams re-check their key). */
  private readonly invalidationListeners: ((invalidation: Invalidation) => void)[] = [];

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly quotas: QuotaService,
    private readonly broadcaster: Broadcaster,
    private readonly cacheMs: number,
  ) {
    // A failed periodic flush loses those times only (the next request sets them again).
    this.flusher = setInterval(() => void this.flushLastUsed().catch(() => {}), LAST_USED_FLUSH_MS);
    this.flusher.unref();
  }

  /** Subscribes to revocations published by other replicas and by the admin CLI. */
  async start(): Promise<void> {
    await this.broadcaster.subscribe(INVALIDATE_CHANNEL, (notice) => {
      if (typeof notice.keyHash === 'string') this.forgetKeyLocally(notice.keyHash);
      if (typeof notice.accountId === 'string') this.forgetAccountLocally(notice.accountId);
    });
  }

  async stop(): Promise<void> {
    clearInterval(this.flusher);
    await this.flushLastUsed();
  }

  /**
   * The principal a presented key stands for; throws AuthenticationFailed for anything else. The cache
   * answers first; a key it does not hold (or holds as expired) is read from the store.
   */
  async authenticate(presented: string): Promise<Principal> {
    const known = this.verifyFromMemory(presented);
    if (known instanceof UnverifiedKey) return this.verifyFromStore(known);
    if (known instanceof AuthenticationFailed) throw known;
    return known;
  }

  /**
   * The principal of a key known by its hash (a stream holds the hash, never the key): the cache within
   * its lifetime, else the store. Throws AuthenticationFailed for a revoked, expired or unknown key.
   */
  async authenticateHash(keyHash: string): Promise<Principal> {
    return this.fromCache(keyHash, this.clock.nowMs()) ?? this.verifyFromStore(new UnverifiedKey(keyHash));
  }

  /** Calls `listener` after each invalidation on this replica, whether made here or broadcast by another. */
  onInvalidation(listener: (invalidation: Invalidation) => void): void {
    this.invalidationListeners.push(listener);
  }

  /**
   * What memory alone says about a presented key: its principal when it was verified within the cache
   * lifetime, a refusal when it cannot be a key of ours, or else an UnverifiedKey for verifyFromStore,
   * which carries the key's hash so that it is computed once.
   */
  verifyFromMemory(presented: string): Principal | AuthenticationFailed | UnverifiedKey {
    if (!isPlausibleKey(presented)) return new AuthenticationFailed();
    const keyHash = hashKey(presented);
    return this.fromCache(keyHash, this.clock.nowMs()) ?? new UnverifiedKey(keyHash);
  }

  /** The principal of a key memory could not vouch for, read from the store; throws AuthenticationFailed. */
  async verifyFromStore({ keyHash }: UnverifiedKey): Promise<Principal> {
    const nowMs = this.clock.nowMs();
    const invalidationsBefore = this.invalidations;
    const found = await keys.findKeyWithAccountByHash(this.store.db, keyHash);
    if (!found) throw new AuthenticationFailed();
    const principal: Principal = {
      accountId: found.account.id,
      keyId: found.key.id,
      permissions: found.key.permissions,
      keyCreatedAt: new Date(found.key.created_at),
      keyExpiresAt: found.key.expires_at ? new Date(found.key.expires_at) : null,
      plan: found.account.plan,
      accountStatus: found.account.status,
      rateLimit: rateLimitPolicyOf(found.account),
      account: accountView(found.account),
    };
    if (this.cacheMs > 0 && this.invalidations === invalidationsBefore) {
      this.cache.set(keyHash, { principal, cachedAtMs: nowMs });
    }
    if (isExpired(principal, nowMs)) throw new AuthenticationFailed('API key expired');
    this.pendingLastUsed.set(principal.keyId, nowMs);
    return principal;
  }

  /** A cached principal whose key has not expired, its use noted for last_used_at. */
  private fromCache(keyHash: string, nowMs: number): Principal | undefined {
    const principal = this.cached(keyHash, nowMs);
    if (!principal || isExpired(principal, nowMs)) return undefined;
    this.pendingLastUsed.set(principal.keyId, nowMs);
    return principal;
  }

  private cached(keyHash: string, nowMs: number): Principal | undefined {
    const entry = this.cache.get(keyHash);
    if (!entry) return undefined;
    if (nowMs - entry.cachedAtMs >= this.cacheMs) {
      this.cache.delete(keyHash);
      return undefined;
    }
    return entry.principal;
  }

  /** Forgets every cached key of an account here and on every replica (plan, status or limits changed). */
  async forgetAccount(accountId: string): Promise<void> {
    this.forgetAccountLocally(accountId);
    await this.broadcaster.publish(INVALIDATE_CHANNEL, { accountId });
  }

  private forgetKeyLocally(keyHash: string): void {
    this.invalidations += 1;
    this.cache.delete(keyHash);
    this.tellListeners({ keyHash });
  }

  private forgetAccountLocally(accountId: string): void {
    this.invalidations += 1;
    for (const [hash, entry] of this.cache) {
      if (entry.principal.accountId === accountId) this.cache.delete(hash);
    }
    this.tellListeners({ accountId });
  }

  private tellListeners(invalidation: Invalidation): void {
    for (const listener of this.invalidationListeners) listener(invalidation);
  }

  /**
   * Writes last-used times in one batch: exact to the flush interval, without a write per request. Flushes
   * run one after another, so `stop` (awaiting the last) never lets the store close under one under way.
   */
  flushLastUsed(): Promise<void> {
    const flush = this.flushing.then(() => this.writeLastUsed());
    // The next flush waits for this one whether it failed or not; this one's caller sees its failure.
    this.flushing = flush.catch(() => {});
    return flush;
  }

  private async writeLastUsed(): Promise<void> {
    if (this.pendingLastUsed.size === 0) return;
    const byTime = new Map<number, string[]>();
    for (const [id, atMs] of this.pendingLastUsed) byTime.set(atMs, [...(byTime.get(atMs) ?? []), id]);
    this.pendingLastUsed.clear();
    for (const [atMs, ids] of byTime)
      await keys.touchApiKeys(this.store.db, ids, new Date(atMs).toISOString());
  }

  async create(principal: Principal, input: NewApiKey): Promise<CreatedApiKey> {
    const requested = input.permissions ?? [...principal.permissions];
    const unknown = requested.find((p) => !isKnownPermission(p));
    if (unknown !== undefined) {
      throw new InvalidRequest(`Unknown permission ${unknown}`, { field: 'permissions', value: unknown });
    }
    refuseBeyondHeld(principal, requested);
    if (!isPrintableName(input.name)) {
      throw new InvalidRequest(`name must be ${PRINTABLE_NAME_RULE}`, { field: 'name', value: input.name });
    }
    const now = this.clock.now();
    const requestedExpiry = input.expires_at === undefined ? undefined : new Date(input.expires_at);
    if (requestedExpiry !== undefined && requestedExpiry.getTime() <= now.getTime()) {
      throw new InvalidRequest('expires_at must be in the future', {
        field: 'expires_at',
        value: input.expires_at,
      });
    }
    const expiresAt = grantedExpiry(principal.keyExpiresAt, requestedExpiry);
    if (expiresAt === undefined) refuseLongerLived(principal, input.expires_at ?? null);
    return this.store.db.transaction().execute(async (trx) => {
      const created = await this.mint(trx, principal.accountId, {
        name: input.name,
        permissions: normalizePermissions(requested),
        expiresAt: expiresAt?.toISOString() ?? null,
        checkQuota: true,
      });
      await recordCreated(trx, 'api_key', created.id);
      return created;
    });
  }

  /**
   * Before an Idempotency-Key replay of a key creation to `principal`: the 403 a fresh request would get
   * when `principal` could not make that key itself (permissions it does not hold, or a later expiry).
   */
  checkReplay(principal: Principal, created: { permissions?: unknown; expires_at?: unknown }): void {
    const permissions = Array.isArray(created.permissions) ? created.permissions.map(String) : ['*'];
    refuseBeyondHeld(principal, permissions);
    const expiresAt = typeof created.expires_at === 'string' ? created.expires_at : null;
    const held = principal.keyExpiresAt;
    if (held !== null && (expiresAt === null || Date.parse(expiresAt) > held.getTime())) {
      refuseLongerLived(principal, expiresAt);
    }
  }

  /** Creates a key inside the caller's transaction (also used by account creation and bootstrap). */
  async mint(
    trx: Executor,
    accountId: string,
    options: { name: string; permissions: string[]; expiresAt: string | null; checkQuota: boolean },
  ): Promise<CreatedApiKey> {
    if (options.checkQuota) {
      await lockAccount(trx, accountId);
      await this.quotas.ensureRoom(trx, accountId, 'api_keys', 1);
    }
    const now = this.clock.now();
    const key = KEY_PREFIX + toBase62(randomBytes(32));
    const row: keys.ApiKey = {
      id: newId('apiKey', now),
      account_id: accountId,
      name: options.name,
      prefix: key.slice(0, KEY_PREFIX.length + 6),
      key_hash: hashKey(key),
      permissions: options.permissions,
      expires_at: options.expiresAt,
      last_used_at: null,
      created_at: now.toISOString(),
    };
    await keys.insertApiKey(trx, row);
    const created = view(row);
    await recordEvent(trx, this.clock, {
      accountId,
      type: 'api_key.created',
      resourceId: row.id,
      data: { api_key_id: row.id, name: row.name, permissions: created.permissions },
    });
    return { ...created, key };
  }

  async list(accountId: string, request: PageRequest) {
    const page = await keys.listApiKeys(this.store.db, accountId, request);
    return { items: page.items.map(view), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<ApiKeyView> {
    const row = await keys.findApiKey(this.store.db, accountId, id);
    if (!row) throw new NotFound('api_key', id);
    return view(row);
  }

  /**
   * Deletes a key at the request of a key (the API): any key may delete itself; other keys need
   * account:write and every permission the key to delete holds (resources/account/api-key-rules.ts).
   */
  async revoke(principal: Principal, id: string): Promise<ApiKeyView> {
    const own = id === principal.keyId;
    if (!own && !allows(principal.permissions, 'account', 'write')) {
      throw new Forbidden('This API key lacks the permission account:write', {
        required_permission: 'account:write',
      });
    }
    const target = await keys.findApiKey(this.store.db, principal.accountId, id);
    if (!target) throw new NotFound('api_key', id);
    const blockers = revocationBlockers(principal, {
      id: target.id,
      permissions: target.permissions,
    });
    if (blockers.length > 0) {
      throw new Forbidden('A key cannot delete a key holding permissions it does not hold itself', {
        permissions: blockers,
        held: principal.permissions,
      });
    }
    return this.delete(principal.accountId, id);
  }

  async delete(accountId: string, id: string): Promise<ApiKeyView> {
    const row = await this.store.db.transaction().execute(async (trx) => {
      const deleted = await keys.deleteApiKey(trx, accountId, id);
      if (!deleted) throw new NotFound('api_key', id);
      await recordEvent(trx, this.clock, {
        accountId,
        type: 'api_key.deleted',
        resourceId: id,
        data: { api_key_id: id, name: deleted.name },
      });
      return deleted;
    });
    this.forgetKeyLocally(row.key_hash);
    this.pendingLastUsed.delete(row.id);
    await this.broadcaster.publish(INVALIDATE_CHANNEL, { keyHash: row.key_hash });
    return view(row);
  }

  /**
   * True when the key is old enough that rotating it is recommended: every 90 days
   * (docs/design.md, "API keys and permissions").
   */
  rotationDue(principal: Principal): boolean {
    const ageMs = this.clock.nowMs() - principal.keyCreatedAt.getTime();
    return ageMs > ROTATION_RECOMMENDED_DAYS * 24 * 3600 * 1000;
  }
}

/** The 403 of a key asking to grant what it does not hold. */
function refuseBeyondHeld(principal: Principal, requested: readonly string[]): void {
  const beyond = permissionsBeyond(principal.permissions, requested);
  if (beyond.length > 0) {
    throw new Forbidden('A key cannot grant permissions it does not hold', {
      permissions: beyond,
      held: principal.permissions,
    });
  }
}

/** The 403 of a key asking for a key that outlives it. */
function refuseLongerLived(principal: Principal, expiresAt: string | null): never {
  throw new Forbidden('A key cannot create a key that expires later than itself', {
    expires_at: expiresAt,
    held_expires_at: principal.keyExpiresAt?.toISOString() ?? null,
  });
}
