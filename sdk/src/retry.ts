/**
 * Retries and idempotency, as one fetch function that openapi-fetch calls for every request.
 *
 * How it works: a POST without an Idempotency-Key gets a fresh random one before its first attempt, and
 * every retry sends the very same request (a clone of it, key included), so the server runs a create at
 * most once however many attempts it takes. Answers 429 and 503 are retried after a delay that starts at
 * `baseDelayMs` (1 s: docs/design.md, "Client retries") and doubles with each retry, capped at `maxDelayMs`,
 * with up to `jitter` of it added at random (never subtracted, so no retry comes sooner than the doubling
 * says) so that many clients refused at once do not come back at once. A `Retry-After` longer than that
 * delay wins: the server knows when room comes back. One longer than `maxDelayMs` ends the retries at
 * once, since waiting less would only be refused again; the caller gets the RateLimitError with
 * `retryAfter`. Anything else (other statuses, network errors) is returned or thrown as it is.
 *
 * The delays are computed here rather than by a retry library because they depend on the answer
 * (Retry-After) and the attempts must share one request identity (the key); the loop is a few lines.
 */

export interface RetryOptions {
  /** Retries after the first attempt (default 5: waits of about 1, 2, 4, 8 and 16 s). 0 disables retrying. */
  maxRetries?: number;
  /** First delay in milliseconds (default 1000); each retry doubles it. */
  baseDelayMs?: number;
  /** Longest delay in milliseconds (default 30000), for the doubling and for Retry-After alike. */
  maxDelayMs?: number;
  /** Up to this fraction of each delay is added at random (default 0.2; 0 for none). */
  jitter?: number;
  /**
   * Wait at least what a 429's `Retry-After` asks (default true). False keeps to the doubling alone, for
   * callers with a schedule of their own (and tests that must not wait whole seconds).
   */
  honorRetryAfter?: boolean;
  /** Told before each wait; the retry waits for a returned promise. */
  onRetry?: (retry: RetryInfo) => void | Promise<void>;
}

export interface RetryInfo {
  /** 1 for the first retry. */
  retry: number;
  method: string;
  url: string;
  /** The status that is being retried (429 or 503). */
  status: number;
  /** How long the SDK waits before the retry, in milliseconds. */
  delayMs: number;
  /** The Retry-After the server sent, in seconds, or null. */
  retryAfter: number | null;
  /** The refused answer's request id. */
  requestId: string | null;
  /** The key every attempt of this request carries (POST only), or null. */
  idempotencyKey: string | null;
}

export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 503]);

interface Policy {
  maxRetries: number;
  baseDelayMs: number;
  maxDelayMs: number;
  jitter: number;
  honorRetryAfter: boolean;
}

export function retryPolicy(options: RetryOptions = {}): Policy {
  const policy = {
    maxRetries: options.maxRetries ?? 5,
    baseDelayMs: options.baseDelayMs ?? 1000,
    maxDelayMs: options.maxDelayMs ?? 30_000,
    jitter: options.jitter ?? 0.2,
  };
  for (const [name, value] of Object.entries(policy)) {
    if (!Number.isFinite(value) || value < 0) throw new RangeError(`retry.${name} must be a number ≥ 0`);
  }
  return { ...policy, honorRetryAfter: options.honorRetryAfter ?? true };
}

/**
 * The wait before retry number `retry` (1-based), or null when the server asks for longer than the
 * policy allows.
 */
export function retryDelay(
  policy: Policy,
  retry: number,
  retryAfterSeconds: number | null,
  random: () => number = Math.random,
): number | null {
  const doubled = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  const jittered = Math.min(policy.maxDelayMs, doubled * (1 + policy.jitter * random()));
  if (retryAfterSeconds === null || !policy.honorRetryAfter) return jittered;
  const asked = retryAfterSeconds * 1000;
  if (asked > policy.maxDelayMs) return null;
  return Math.max(jittered, asked);
}

/** Retry-After as seconds: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, nowMs = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

type Fetch = (request: Request) => Promise<Response>;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Wraps `send` with the idempotency key and the retries described above. */
export function retryingFetch(send: Fetch, options: RetryOptions = {}): Fetch {
  const policy = retryPolicy(options);
  return async (request) => {
    let idempotencyKey: string | null = null;
    if (request.method === 'POST') {
      idempotencyKey = request.headers.get('idempotency-key');
      if (idempotencyKey === null) {
        idempotencyKey = crypto.randomUUID();
        request.headers.set('idempotency-key', idempotencyKey);
      }
    }
    for (let retry = 1; ; retry++) {
      // The body can be read once: each attempt sends a copy and keeps the original for the next.
      const attempt = retry <= policy.maxRetries ? request.clone() : request;
      const response = await send(attempt);
      if (!RETRYABLE_STATUSES.has(response.status) || retry > policy.maxRetries) return response;
      const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
      const delayMs = retryDelay(policy, retry, retryAfter);
      if (delayMs === null) return response;
      // Free the connection: this answer's body is not needed, its status and headers say enough.
      await response.body?.cancel();
      await options.onRetry?.({
        retry,
        method: request.method,
        url: request.url,
        status: response.status,
        delayMs,
        retryAfter,
        requestId: response.headers.get('x-request-id'),
        idempotencyKey,
      });
      await sleep(delayMs);
    }
  };
}
