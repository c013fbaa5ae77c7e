/**
 * Every error code Nimbus answers with, its HTTP status and what it means: the one list. The error
 * handler takes a code's status from here, the OpenAPI document describes each error status from here,
 * and test/error-catalogue.test.ts holds docs/api.md's table, the SDK's list and the CLI's exit codes to it.
 *
 * A code is a promise to clients (they branch on it), so entries are added, never renamed. Meanings are
 * one line without semicolons: the document joins the meanings of codes that share a status with "; ".
 */

interface CatalogueEntry {
  status: number;
  meaning: string;
}

export const ERROR_CATALOGUE = {
  invalid_request: {
    status: 400,
    meaning:
      'a path, query, header or body value is malformed or out of range (`details.field`, `details.value`, ' +
      '`details.allowed_values`), or the request came over plain HTTP',
  },
  authentication_failed: { status: 401, meaning: 'the API key is missing, unknown, revoked or expired' },
  payment_required: {
    status: 402,
    meaning: 'the account is past due (reads, stops and deletes still work)',
  },
  forbidden: { status: 403, meaning: 'the key lacks the permission, or the account is suspended' },
  quota_exceeded: {
    status: 403,
    meaning:
      "the operation would pass one of the account's quotas (`details.quota`, `limit`, `used`, `requested`)",
  },
  not_found: {
    status: 404,
    meaning: 'no such resource in this account (`details.resource`, `details.id`), endpoint or API version',
  },
  method_not_allowed: {
    status: 405,
    meaning: 'the path exists but not with this method (`Allow`, `details.allowed_values`)',
  },
  request_timeout: {
    status: 408,
    meaning: 'the request line, headers or body did not arrive in time (the connection closes)',
  },
  conflict: {
    status: 409,
    meaning:
      'the resource is in a state that does not allow this, or the request duplicates another resource',
  },
  idempotency_key_in_use: {
    status: 409,
    meaning: 'the first request with this Idempotency-Key (POST only) is still running',
  },
  payload_too_large: { status: 413, meaning: 'the body is larger than 1 MiB' },
  idempotency_key_reused: {
    status: 422,
    meaning: 'this Idempotency-Key was already used with a different request',
  },
  rate_limit_exceeded: {
    status: 429,
    meaning: 'the rate limit is spent: wait `error.retry_after` seconds (also in `Retry-After`)',
  },
  headers_too_large: {
    status: 431,
    meaning:
      'the request line and headers exceed 16 KiB or 1,000 lines (past 64 KiB the parser refuses them and ' +
      'the connection closes)',
  },
  server_error: {
    status: 500,
    meaning: 'an unexpected failure: the cause is in the server log, never in the answer',
  },
  service_unavailable: {
    status: 503,
    meaning:
      'the server is shutting down, a backing service is unreachable, or a region has no capacity left ' +
      '(`details.reason`)',
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;
export type ErrorStatus = (typeof ERROR_CATALOGUE)[ErrorCode]['status'];

/** The codes in catalogue order (by status). */
export const ERROR_CODES = Object.keys(ERROR_CATALOGUE) as ErrorCode[];

/** The statuses some code is answered with, ascending. */
export const ERROR_STATUSES: readonly ErrorStatus[] = [
  ...new Set(ERROR_CODES.map((code) => ERROR_CATALOGUE[code].status)),
].sort((a, b) => a - b);

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_CATALOGUE, value);
}

export function statusOf(code: ErrorCode): ErrorStatus {
  return ERROR_CATALOGUE[code].status;
}

/** The codes answered with `status`, in catalogue order. */
export function codesOf(status: ErrorStatus): ErrorCode[] {
  return ERROR_CODES.filter((code) => ERROR_CATALOGUE[code].status === status);
}

/** What an answer with `status` means, in the reader's words: each of its codes with its meaning. */
export function describeStatus(status: ErrorStatus): string {
  return codesOf(status)
    .map((code) => `\`${code}\`: ${ERROR_CATALOGUE[code].meaning}`)
    .join('; ');
}
