/**
 * Live metric streams (the WebSocket protocol of docs/api.md "Live metrics"), apart from the socket
 * library: the HTTP layer hands each accepted connection over as a StreamSocket and forwards its
 * messages, pongs and close; everything else — authentication, limits, subscriptions, timing,
 * backpressure — is here.
 *
 * Timing. One timer per process ticks every PHASE_MS. Each instance has a phase, a fixed slot of the
 * second (phaseOf: from its id), and its messages go out in that slot: so the sends of many streams are
 * spread over the second instead of all falling on its start, where the last of 10,000 would leave
 * several hundred milliseconds after its sample. A tick samples each instance of its slot that some due
 * stream watches, once, in one driver call (the driver answers any replica alike), and sends each due
 * stream the values; the sample time, the message's `timestamp`, is the tick's. A stream with interval n
 * is due in the seconds divisible by n, so all streams of one interval share their samples. A message is made once per instance and choice of metrics, as text and
 * as UTF-8 bytes, and sent to every stream that wants it (ten viewers of one instance cost one
 * JSON.stringify and one encoding; what is left per stream is the socket's own write). Status messages,
 * and alert messages (an incident firing or resolving on a watched instance), come from the status relay
 * through the broadcaster (resources/metrics/status-relay.ts), so transitions and incidents made on any replica
 * reach every stream of the owning account (alerts need no permission beyond the stream's own
 * monitoring:read, which is also what reading policies and incidents takes).
 *
 * Backpressure. A socket whose unsent data passes SEND_BUFFER_BYTES gets no more samples until it
 * drains; each sample it misses is counted and the count goes out as `dropped` in the next message it
 * gets. So a client that stops reading costs the server a bounded buffer, never growing memory.
 * Status and alert messages are few and matter more: they wait for a larger bound, STATUS_BUFFER_BYTES.
 *
 * Liveness. Every 30 s each socket is pinged; one that has not answered the previous ping is dropped.
 *
 * Authorisation lasts no longer than on REST. A stream keeps its key's hash (never the key) and is
 * authorised again: on every client message, at once when the auth cache drops its key or its account
 * (a revocation or account change on this replica, or broadcast by another), and every RECHECK_MS, which
 * catches what no notice announces (expiry, a missed notice) within the auth cache's lifetime. A key no
 * longer valid ends the stream with 4401; a suspended account or a missing monitoring:read with 4403.
 *
 * Client messages cost what requests cost: each is one request of the account's rate budget, and a
 * socket that sends more than the budget allows, or more than MAX_PENDING_MESSAGES ahead of the
 * server's answers, is closed with 4429.
 */

import type { ComputeDriver, MachineSpec, MetricSample } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import { allows } from '../../platform/domain/permissions.js';
import type { ErrorCode } from '../../platform/error-catalogue.js';
import { AuthenticationFailed } from '../../platform/errors.js';
import type { Broadcaster, Notice } from '../../platform/events/broadcast.js';
import type { Principal } from '../../platform/principal.js';
import type { RateDecision } from '../../platform/rate-limits/rate-counters.js';
import type { RateLimitService } from '../../platform/rate-limits/rate-limits.js';
import { everySlot, type SlotTimer } from '../../platform/slot-timer.js';
import type { Store } from '../../platform/store/db.js';
import { type ApiKeyService, hashKey, type Invalidation } from '../account/api-key-service.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import { machineSpec } from '../instances/kind.js';
import { findAccountInstance } from '../instances/store.js';
import { type MetricName, metricsOf } from './catalog.js';
import { sampleMany } from './sampling.js';
import { ALERT_CHANNEL, type AlertNotice, STATUS_CHANNEL, type StatusNotice } from './status-relay.js';

/** WebSocket close codes of the protocol. */
export const CLOSE = {
  normal: 1000,
  badMessage: 4400,
  badKey: 4401,
  forbidden: 4403,
  notFound: 4404,
  tooMany: 4429,
} as const;

export const AUTH_TIMEOUT_MS = 5_000;
export const PING_INTERVAL_MS = 30_000;
export const DEFAULT_INTERVAL_S = 5;
export const MAX_INTERVAL_S = 60;
export const MAX_INSTANCES_PER_STREAM = 100;
/** How often every open stream's key is verified again (the auth cache answers most of these). */
export const RECHECK_MS = 1_000;
/** Client messages a socket may have waiting for the server; a client sending faster is flooding. */
export const MAX_PENDING_MESSAGES = 16;
/** Slots of the second that instances' messages are spread over, PHASE_MS apart. */
export const PHASES = 10;
export const PHASE_MS = 1000 / PHASES;
const SEND_BUFFER_BYTES = 64 * 1024;
const STATUS_BUFFER_BYTES = 1024 * 1024;
/** Statuses in which an instance has a machine worth sampling. */
const SAMPLED_STATUSES = new Set(['running', 'stopping']);

/** The connection as this module needs it; the HTTP layer adapts the `ws` socket to it. */
export interface StreamSocket {
  /** Sends a text message: a string, or its UTF-8 bytes (one Buffer shared by many sockets). */
  send(text: string | Buffer): void;
  /** Bytes queued and not yet handed to the network. */
  bufferedAmount(): number;
  close(code: number, reason: string): void;
  ping(): void;
  terminate(): void;
}

export interface StreamOptions {
  maxStreamsPerAccount: number;
}

/** What a stream is opened for: one instance (its id from the path), or any of the account's. */
export type StreamScope = { instanceId: string } | { account: true };

interface Watched {
  spec: MachineSpec;
  available: MetricName[];
  /** The instance's slot of the second (phaseOf). */
  phase: number;
  status: string;
  /** When `status` was read (ISO): notices of events before it are no news. */
  readAt: string;
}

/** A refusal on the stream: its close code, and the error message sent before it with a catalogue code. */
class ProtocolError extends Error {
  constructor(
    readonly closeCode: number,
    message: string,
    readonly code: ErrorCode,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export class StreamSession {
  principal: Principal | null = null;
  /** SHA-256 of the key the stream was admitted with: how it is authorised again. */
  keyHash: string | null = null;
  /** Client messages received and not yet handled. */
  private pendingMessages = 0;
  readonly watched = new Map<string, Watched>();
  intervalS = DEFAULT_INTERVAL_S;
  metrics: MetricName[] | null = null;
  dropped = 0;
  alive = true;
  closed = false;
  private authTimer: NodeJS.Timeout | null = null;
  private pending: Promise<void> = Promise.resolve();

  constructor(
    readonly hub: MetricsStreams,
    readonly socket: StreamSocket,
    readonly scope: StreamScope,
    readonly clientIp: string,
  ) {}

  /** The key from the upgrade's headers, or null: the client then has 5 s to send an auth message. */
  begin(presentedKey: string | null): void {
    if (presentedKey !== null) {
      this.serially(() => this.authenticate(presentedKey));
      return;
    }
    this.authTimer = setTimeout(
      () => this.fail(new ProtocolError(CLOSE.badKey, 'No API key within 5 s', 'authentication_failed')),
      AUTH_TIMEOUT_MS,
    );
  }

  /**
   * A text message from the client; handled one at a time, in order. Once admitted, each message is
   * charged to the account's rate budget here, before any parsing, when the counters can answer at once.
   */
  receive(text: string): void {
    if (this.closed) return;
    let charged = false;
    if (this.principal !== null) {
      const decision = this.hub.chargeNow(this.principal, this.clientIp);
      if (decision !== undefined && !decision.allowed) {
        this.fail(rateLimited(decision.retryAfter));
        return;
      }
      charged = decision !== undefined;
    }
    this.pendingMessages += 1;
    if (this.pendingMessages > MAX_PENDING_MESSAGES) {
      this.fail(
        new ProtocolError(
          CLOSE.tooMany,
          `More than ${MAX_PENDING_MESSAGES} messages waiting for an answer`,
          'rate_limit_exceeded',
          { max_pending_messages: MAX_PENDING_MESSAGES },
        ),
      );
      return;
    }
    this.serially(async () => {
      this.pendingMessages -= 1;
      await this.handle(text, charged);
    });
  }

  /** A renewed authorisation (hub.recheck): the stream goes on with it, or ends with the refusal. */
  reauthorised(outcome: Principal | ProtocolError): void {
    if (this.closed) return;
    if (outcome instanceof ProtocolError) this.fail(outcome);
    else this.principal = outcome;
  }

  pong(): void {
    this.alive = true;
  }

  /** The socket closed (either side): release what the stream held. */
  ended(): void {
    if (this.authTimer) clearTimeout(this.authTimer);
    this.closed = true;
    this.hub.release(this);
  }

  /** Sends a message unless the socket is too far behind; missed samples are reported with the next. */
  deliver(message: Record<string, unknown>, bound = SEND_BUFFER_BYTES): boolean {
    return this.deliverText(JSON.stringify(message), bound);
  }

  /**
   * deliver() of a message already in JSON: a JSON object's text, and optionally the same as UTF-8 bytes
   * (made once for all the streams it goes to). `dropped` is added as its last member when samples were
   * missed.
   */
  deliverText(text: string, bound = SEND_BUFFER_BYTES, bytes?: Buffer): boolean {
    if (this.closed) return false;
    if (this.socket.bufferedAmount() > bound) {
      this.dropped += 1;
      return false;
    }
    if (this.dropped > 0) this.socket.send(`${text.slice(0, -1)},"dropped":${this.dropped}}`);
    else this.socket.send(bytes ?? text);
    this.dropped = 0;
    return true;
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close(code, reason.slice(0, 120));
    this.hub.release(this);
  }

  private serially(step: () => Promise<void>): void {
    this.pending = this.pending.then(async () => {
      if (this.closed) return;
      try {
        await step();
      } catch (error) {
        this.fail(error);
      }
    });
  }

  private fail(error: unknown): void {
    if (this.closed) return;
    if (error instanceof ProtocolError) {
      this.deliver(
        {
          type: 'error',
          code: error.code,
          message: error.message,
          ...(error.details ? { details: error.details } : {}),
        },
        STATUS_BUFFER_BYTES,
      );
      this.close(error.closeCode, error.message);
      return;
    }
    this.hub.reportError(error);
    this.deliver({ type: 'error', code: 'server_error', message: 'Internal error' }, STATUS_BUFFER_BYTES);
    this.close(1011, 'Internal error');
  }

  private async handle(text: string, charged: boolean): Promise<void> {
    if (this.principal !== null && !charged) {
      const decision = await this.hub.charge(this.principal, this.clientIp);
      if (!decision.allowed) throw rateLimited(decision.retryAfter);
    }
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      throw new ProtocolError(CLOSE.badMessage, 'Messages must be JSON objects', 'invalid_request');
    }
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      throw new ProtocolError(CLOSE.badMessage, 'Messages must be JSON objects', 'invalid_request');
    }
    const { type } = message as { type?: unknown };
    if (this.principal === null) {
      if (type !== 'auth') {
        throw new ProtocolError(
          CLOSE.badKey,
          'The first message must be {"type":"auth","api_key":…}',
          'authentication_failed',
        );
      }
      const key = (message as { api_key?: unknown }).api_key;
      if (typeof key !== 'string') {
        throw new ProtocolError(CLOSE.badKey, 'api_key must be a string', 'authentication_failed');
      }
      if (this.authTimer) clearTimeout(this.authTimer);
      await this.authenticate(key);
      return;
    }
    if (type === 'subscribe') {
      // Authorised anew: the key, the account and the permission as they are now, not at admission.
      this.principal = await this.hub.authorise(this.keyHash as string);
      await this.subscribe(message as Record<string, unknown>);
      return;
    }
    if (type === 'auth')
      throw new ProtocolError(CLOSE.badMessage, 'Already authenticated', 'invalid_request');
    throw new ProtocolError(CLOSE.badMessage, 'type must be auth or subscribe', 'invalid_request', {
      field: 'type',
      value: type,
      allowed_values: ['auth', 'subscribe'],
    });
  }

  private async authenticate(key: string): Promise<void> {
    this.principal = await this.hub.admit(this, key);
    this.keyHash = hashKey(key);
    if ('instanceId' in this.scope) {
      this.watched.set(this.scope.instanceId, await this.hub.watch(this.principal, this.scope.instanceId));
      if (this.closed) return;
      this.hub.attach(this);
    }
    this.deliver({
      type: 'ready',
      interval: this.intervalS,
      instances: [...this.watched.keys()],
      statuses: Object.fromEntries([...this.watched].map(([id, w]) => [id, w.status])),
    });
  }

  private async subscribe(message: Record<string, unknown>): Promise<void> {
    const allowedFields =
      'instanceId' in this.scope
        ? ['type', 'interval', 'metrics']
        : ['type', 'interval', 'metrics', 'instances'];
    for (const field of Object.keys(message)) {
      if (!allowedFields.includes(field)) {
        throw new ProtocolError(CLOSE.badMessage, `Unknown field ${field} in subscribe`, 'invalid_request', {
          field,
          allowed_values: allowedFields,
        });
      }
    }
    const interval = message.interval ?? this.intervalS;
    if (!Number.isInteger(interval) || (interval as number) < 1 || (interval as number) > MAX_INTERVAL_S) {
      throw new ProtocolError(
        CLOSE.badMessage,
        `interval must be a whole number of seconds from 1 to ${MAX_INTERVAL_S}`,
        'invalid_request',
        {
          field: 'interval',
          value: interval,
        },
      );
    }
    let watched = new Map(this.watched);
    if (!('instanceId' in this.scope) && message.instances !== undefined) {
      const ids = message.instances;
      if (
        !Array.isArray(ids) ||
        ids.length > MAX_INSTANCES_PER_STREAM ||
        ids.some((id) => typeof id !== 'string' || id.length === 0 || id.length > 64)
      ) {
        throw new ProtocolError(
          CLOSE.badMessage,
          `instances must be a list of up to ${MAX_INSTANCES_PER_STREAM} instance ids`,
          'invalid_request',
          {
            field: 'instances',
          },
        );
      }
      watched = new Map();
      for (const id of new Set(ids as string[])) {
        watched.set(id, this.watched.get(id) ?? (await this.hub.watch(this.principal as Principal, id)));
      }
    }
    let metrics: MetricName[] | null = this.metrics;
    if (message.metrics !== undefined) {
      const names = message.metrics;
      const available = new Set([...watched.values()].flatMap((w) => w.available));
      if (!Array.isArray(names) || names.length === 0 || names.some((n) => !available.has(n as MetricName))) {
        throw new ProtocolError(
          CLOSE.badMessage,
          'metrics must be a non-empty list of metrics the instances have',
          'invalid_request',
          {
            field: 'metrics',
            value: names,
            allowed_values: [...available],
          },
        );
      }
      metrics = [...new Set(names as MetricName[])];
    }
    // A recheck may have ended the stream while the instances were read.
    if (this.closed) return;
    this.hub.detach(this);
    this.watched.clear();
    for (const [id, w] of watched) this.watched.set(id, w);
    this.intervalS = interval as number;
    this.metrics = metrics;
    this.hub.attach(this);
    this.deliver({
      type: 'subscribed',
      interval: this.intervalS,
      metrics: this.metrics,
      instances: [...this.watched.keys()],
      statuses: Object.fromEntries([...this.watched].map(([id, w]) => [id, w.status])),
    });
  }
}

function rateLimited(retryAfter: number): ProtocolError {
  return new ProtocolError(
    CLOSE.tooMany,
    `Rate limit exceeded, retry in ${retryAfter} seconds`,
    'rate_limit_exceeded',
    { retry_after: retryAfter },
  );
}

/** Throws the 4403 refusal for a principal that may not stream: a suspended account, no monitoring:read. */
function permitted(principal: Principal): void {
  if (principal.accountStatus === 'suspended') {
    throw new ProtocolError(CLOSE.forbidden, 'This account is suspended', 'forbidden');
  }
  if (!allows(principal.permissions, 'monitoring', 'read')) {
    throw new ProtocolError(
      CLOSE.forbidden,
      'This API key lacks the permission monitoring:read',
      'forbidden',
      {
        required_permission: 'monitoring:read',
      },
    );
  }
}

/** The instance's slot of the second, 0 to PHASES - 1: FNV-1a of its id, the same on every replica. */
export function phaseOf(instanceId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < instanceId.length; i++) {
    hash ^= instanceId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % PHASES;
}

/** A metrics message's text: the values of `metrics` (in that order), or all the sample has. */
function metricsMessage(
  instanceId: string,
  timestamp: string,
  sample: MetricSample,
  metrics: readonly MetricName[] | null,
): string {
  const values: Record<string, unknown> = { type: 'metrics', instance_id: instanceId, timestamp };
  for (const metric of metrics ?? (Object.keys(sample) as MetricName[])) {
    if (metric in sample && metric !== ('timestamp' as string)) values[metric] = sample[metric];
  }
  return JSON.stringify(values);
}

export class MetricsStreams {
  private readonly sessions = new Set<StreamSession>();
  private readonly byInstance = new Map<string, Set<StreamSession>>();
  private readonly perAccount = new Map<string, number>();
  private readonly counted = new Set<StreamSession>();
  private readonly seenEvents = new Set<string>();
  private tickTimer: SlotTimer | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private recheckTimer: NodeJS.Timeout | null = null;
  /** Key verifications under way, by key hash: one store read however many streams share the key. */
  private readonly verifying = new Map<string, Promise<Principal>>();
  private ticking = false;
  /** Milliseconds from sample time to the send of its messages, for the benchmark and the operator. */
  onTick: ((lagMs: number, sent: number) => void) | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly driver: ComputeDriver,
    private readonly apiKeys: ApiKeyService,
    private readonly rateLimits: RateLimitService,
    private readonly broadcaster: Broadcaster,
    private readonly options: StreamOptions,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  async start(): Promise<void> {
    await this.broadcaster.subscribe(STATUS_CHANNEL, (notice) => this.statusChanged(notice));
    await this.broadcaster.subscribe(ALERT_CHANNEL, (notice) => this.alertChanged(notice));
    this.pingTimer = setInterval(() => this.pingAll(), PING_INTERVAL_MS);
    this.pingTimer.unref();
    this.apiKeys.onInvalidation((invalidation) => this.invalidated(invalidation));
    this.recheckTimer = setInterval(() => this.recheck(this.sessions), RECHECK_MS);
    this.recheckTimer.unref();
    this.tickTimer = everySlot(PHASE_MS, () => {
      void this.tick().catch((error) => this.onError(error));
    });
  }

  stop(): void {
    this.tickTimer?.stop();
    if (this.pingTimer) clearInterval(this.pingTimer);
    if (this.recheckTimer) clearInterval(this.recheckTimer);
    this.tickTimer = null;
    this.pingTimer = null;
    this.recheckTimer = null;
    for (const session of [...this.sessions]) session.close(1001, 'Server shutting down');
  }

  /** A new connection: the session takes it from here. */
  open(
    socket: StreamSocket,
    scope: StreamScope,
    presentedKey: string | null,
    clientIp: string,
  ): StreamSession {
    const session = new StreamSession(this, socket, scope, clientIp);
    this.sessions.add(session);
    session.begin(presentedKey);
    return session;
  }

  get openStreams(): number {
    return this.sessions.size;
  }

  reportError(error: unknown): void {
    this.onError(error);
  }

  /** Authentication, the rate limit (a stream is one request), the permission and the account's stream count. */
  async admit(session: StreamSession, key: string): Promise<Principal> {
    let principal: Principal;
    try {
      principal = await this.apiKeys.authenticate(key);
    } catch (error) {
      if (!(error instanceof AuthenticationFailed)) throw error;
      await this.rateLimits.consumeForClient(session.clientIp);
      throw new ProtocolError(CLOSE.badKey, 'Invalid API key', 'authentication_failed');
    }
    const decision = await this.rateLimits.decide(principal, session.clientIp, 'consume');
    if (!decision.allowed) {
      throw new ProtocolError(
        CLOSE.tooMany,
        `Rate limit exceeded, retry in ${decision.retryAfter} seconds`,
        'rate_limit_exceeded',
        {
          retry_after: decision.retryAfter,
        },
      );
    }
    permitted(principal);
    const open = this.perAccount.get(principal.accountId) ?? 0;
    if (open >= this.options.maxStreamsPerAccount) {
      throw new ProtocolError(
        CLOSE.tooMany,
        `At most ${this.options.maxStreamsPerAccount} streams per account are open at once`,
        'rate_limit_exceeded',
        {
          max_streams: this.options.maxStreamsPerAccount,
        },
      );
    }
    this.perAccount.set(principal.accountId, open + 1);
    this.counted.add(session);
    return principal;
  }

  /**
   * The principal of a stream's key as it is now, allowed to stream: throws the refusal that ends the
   * stream (4401 for a key no longer valid, 4403 for a suspended account or a lost permission).
   */
  async authorise(keyHash: string): Promise<Principal> {
    let principal: Principal;
    try {
      principal = await this.verifyKey(keyHash);
    } catch (error) {
      if (!(error instanceof AuthenticationFailed)) throw error;
      throw new ProtocolError(CLOSE.badKey, 'The API key is no longer valid', 'authentication_failed');
    }
    permitted(principal);
    return principal;
  }

  /** Charges a client message to its account's budget at once, or undefined when the counters are remote. */
  chargeNow(principal: Principal, clientIp: string): RateDecision | undefined {
    return this.rateLimits.decideNow(principal, clientIp, 'consume');
  }

  charge(principal: Principal, clientIp: string): Promise<RateDecision> {
    return this.rateLimits.decide(principal, clientIp, 'consume');
  }

  private verifyKey(keyHash: string): Promise<Principal> {
    let pending = this.verifying.get(keyHash);
    if (pending === undefined) {
      pending = this.apiKeys.authenticateHash(keyHash).finally(() => {
        if (this.verifying.get(keyHash) === pending) this.verifying.delete(keyHash);
      });
      this.verifying.set(keyHash, pending);
    }
    return pending;
  }

  /** The auth cache dropped a key or an account: the streams holding them are authorised again now. */
  private invalidated(invalidation: Invalidation): void {
    // A verification under way may have read the store before the change: start afresh.
    this.verifying.clear();
    const affected = [...this.sessions].filter((session) =>
      'keyHash' in invalidation
        ? session.keyHash === invalidation.keyHash
        : session.principal?.accountId === invalidation.accountId,
    );
    this.recheck(affected);
  }

  /** Authorises admitted streams again, once per key; each goes on or ends (StreamSession.reauthorised). */
  private recheck(sessions: Iterable<StreamSession>): void {
    const byKey = new Map<string, StreamSession[]>();
    for (const session of sessions) {
      if (session.keyHash === null || session.closed) continue;
      const group = byKey.get(session.keyHash);
      if (group) group.push(session);
      else byKey.set(session.keyHash, [session]);
    }
    for (const [keyHash, group] of byKey) {
      this.authorise(keyHash).then(
        (principal) => {
          for (const session of group) session.reauthorised(principal);
        },
        (error: unknown) => {
          // A store that cannot answer now is no reason to end streams: the next recheck tries again.
          if (!(error instanceof ProtocolError)) return this.onError(error);
          for (const session of group) session.reauthorised(error);
        },
      );
    }
  }

  /** What a stream needs of one of the account's instances; another account's is not found (4404). */
  async watch(principal: Principal, instanceId: string): Promise<Watched> {
    const instance = await findAccountInstance(this.store.db, principal.accountId, instanceId);
    if (!instance) {
      throw new ProtocolError(CLOSE.notFound, `Instance ${instanceId} not found`, 'not_found', {
        resource: 'instance',
        id: instanceId,
      });
    }
    return {
      spec: machineSpec(instance),
      available: metricsOf(instanceTypeNamed(instance.instance_type)),
      phase: phaseOf(instance.id),
      status: instance.status,
      readAt: new Date(this.clock.nowMs()).toISOString(),
    };
  }

  attach(session: StreamSession): void {
    for (const id of session.watched.keys()) {
      let set = this.byInstance.get(id);
      if (!set) {
        set = new Set();
        this.byInstance.set(id, set);
      }
      set.add(session);
    }
  }

  detach(session: StreamSession): void {
    for (const id of session.watched.keys()) {
      const set = this.byInstance.get(id);
      set?.delete(session);
      if (set?.size === 0) this.byInstance.delete(id);
    }
  }

  release(session: StreamSession): void {
    if (!this.sessions.delete(session)) return;
    this.detach(session);
    if (this.counted.delete(session) && session.principal) {
      const left = (this.perAccount.get(session.principal.accountId) ?? 1) - 1;
      if (left <= 0) this.perAccount.delete(session.principal.accountId);
      else this.perAccount.set(session.principal.accountId, left);
    }
  }

  /** One slot of a second: sample the instances of this phase that due streams watch, once each, and send. */
  async tick(): Promise<void> {
    if (this.ticking) return; // the previous slot is still sending: skip rather than pile up
    this.ticking = true;
    try {
      const atMs = Math.floor(this.clock.nowMs() / PHASE_MS) * PHASE_MS;
      const second = Math.floor(atMs / 1000);
      const phase = Math.round((atMs - second * 1000) / PHASE_MS);
      const due: StreamSession[] = [];
      const wanted = new Map<string, MachineSpec>();
      for (const session of this.sessions) {
        if (session.principal === null || session.closed || second % session.intervalS !== 0) continue;
        let watches = false;
        for (const [id, w] of session.watched) {
          if (w.phase !== phase) continue;
          watches = true;
          if (SAMPLED_STATUSES.has(w.status)) wanted.set(id, w.spec);
        }
        if (watches) due.push(session);
      }
      if (due.length === 0) return;
      const at = new Date(atMs);
      const samples = await sampleMany(this.driver, [...wanted.values()], at);
      const timestamp = at.toISOString();
      // Messages by instance and metrics asked for ('' for all), made for the first stream wanting one.
      const messages = new Map<string, { text: string; bytes: Buffer }>();
      let sent = 0;
      for (const session of due) {
        const choice = session.metrics?.join(',') ?? '';
        for (const [id, w] of session.watched) {
          if (w.phase !== phase) continue;
          const sample = samples.get(id);
          if (sample === undefined || sample instanceof Error) continue;
          const key = `${id} ${choice}`;
          let message = messages.get(key);
          if (message === undefined) {
            const text = metricsMessage(id, timestamp, sample, session.metrics);
            message = { text, bytes: Buffer.from(text) };
            messages.set(key, message);
          }
          if (session.deliverText(message.text, undefined, message.bytes)) sent++;
        }
      }
      for (const sample of samples.values()) if (sample instanceof Error) this.onError(sample);
      this.onTick?.(this.clock.nowMs() - atMs, sent);
    } finally {
      this.ticking = false;
    }
  }

  /** Whether this event's notice is news (the relay may pass one twice when its job moves). */
  private firstSight(eventId: unknown): boolean {
    if (typeof eventId !== 'string' || this.seenEvents.has(eventId)) return false;
    this.seenEvents.add(eventId);
    if (this.seenEvents.size > 10_000) {
      const keep = [...this.seenEvents].slice(-5_000);
      this.seenEvents.clear();
      for (const id of keep) this.seenEvents.add(id);
    }
    return true;
  }

  /** An incident fired or resolved: every stream of the account watching the instance is told. */
  private alertChanged(raw: Notice): void {
    const notice = raw as AlertNotice;
    if (!this.firstSight(notice.event_id)) return;
    const viewers = this.byInstance.get(notice.instance_id);
    if (!viewers) return;
    let text: string | null = null;
    for (const session of viewers) {
      if (session.principal?.accountId !== notice.account_id) continue;
      const watched = session.watched.get(notice.instance_id);
      if (!watched || notice.timestamp < watched.readAt) continue;
      text ??= JSON.stringify({
        type: 'alert',
        event: notice.type,
        instance_id: notice.instance_id,
        policy_id: notice.policy_id,
        incident_id: notice.incident_id,
        name: notice.name,
        metric: notice.metric,
        compare: notice.compare,
        state: notice.state,
        window: notice.window,
        value: notice.value,
        threshold: notice.threshold,
        started_at: notice.started_at,
        resolved_at: notice.resolved_at,
        timestamp: notice.timestamp,
      });
      session.deliverText(text, STATUS_BUFFER_BYTES);
    }
  }

  private statusChanged(raw: Notice): void {
    const notice = raw as StatusNotice;
    if (!this.firstSight(notice.event_id)) return;
    for (const session of this.byInstance.get(notice.instance_id) ?? []) {
      if (session.principal?.accountId !== notice.account_id) continue;
      const watched = session.watched.get(notice.instance_id);
      if (!watched || notice.timestamp < watched.readAt) continue;
      watched.status = notice.status;
      session.deliver(
        {
          type: 'status',
          instance_id: notice.instance_id,
          status: notice.status,
          event: notice.type,
          timestamp: notice.timestamp,
        },
        STATUS_BUFFER_BYTES,
      );
      if (notice.status === 'deleted' && 'instanceId' in session.scope) {
        session.close(CLOSE.normal, 'The instance was deleted');
      } else if (notice.status === 'deleted') {
        this.detachOne(session, notice.instance_id);
      }
    }
  }

  private detachOne(session: StreamSession, instanceId: string): void {
    session.watched.delete(instanceId);
    const set = this.byInstance.get(instanceId);
    set?.delete(session);
    if (set?.size === 0) this.byInstance.delete(instanceId);
  }

  private pingAll(): void {
    for (const session of this.sessions) {
      if (!session.alive) {
        session.socket.terminate();
        session.ended();
        continue;
      }
      session.alive = false;
      session.socket.ping();
    }
  }
}
