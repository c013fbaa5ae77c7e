/**
 * The SDK's errors. Every failure the API answers becomes a NimbusApiError (or the subclass for its
 * status) carrying the envelope's `code`, `details` and `metadata.request_id`, so callers branch on
 * `instanceof` or on `code` and quote `requestId` when they ask for help.
 */

/**
 * Every error code the API answers with, and its status: a copy of the server's error catalogue
 * (src/platform/error-catalogue.ts, kept equal by test/error-catalogue.test.ts), since the SDK carries
 * no server code. An answer with no envelope (from a proxy) has the code `http_<status>` instead.
 */
export const API_ERROR_CODES = {
  invalid_request: 400,
  authentication_failed: 401,
  payment_required: 402,
  forbidden: 403,
  quota_exceeded: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  idempotency_key_in_use: 409,
  payload_too_large: 413,
  idempotency_key_reused: 422,
  rate_limit_exceeded: 429,
  headers_too_large: 431,
  server_error: 500,
  service_unavailable: 503,
} as const;

export type ApiErrorCode = keyof typeof API_ERROR_CODES;

export function isApiErrorCode(code: string): code is ApiErrorCode {
  return Object.hasOwn(API_ERROR_CODES, code);
}

/** Base of every error this SDK throws itself. */
export class NimbusError extends Error {
  override name = 'NimbusError';
}

/** What the API's error envelope says, plus the HTTP status it came with. */
export interface ApiErrorFields {
  status: number;
  code: string;
  message: string;
  requestId: string | null;
  details: Record<string, unknown> | null;
  /** Seconds to wait (429 only): `error.retry_after`, else the `Retry-After` header. */
  retryAfter: number | null;
}

export class NimbusApiError extends NimbusError {
  override name = 'NimbusApiError';
  readonly status: number;
  readonly code: string;
  readonly requestId: string | null;
  readonly details: Record<string, unknown> | null;
  readonly retryAfter: number | null;
  /** The envelope's `error.message` alone (`message` adds the code and request id). */
  readonly apiMessage: string;

  constructor(fields: ApiErrorFields) {
    super(fields.requestId ? `${fields.message} (${fields.code}, ${fields.requestId})` : fields.message);
    this.apiMessage = fields.message;
    this.status = fields.status;
    this.code = fields.code;
    this.requestId = fields.requestId;
    this.details = fields.details;
    this.retryAfter = fields.retryAfter;
  }
}

/** 400: validation failed; `details` names `field`, `value` and, where a set exists, `allowed_values`. */
export class InvalidRequestError extends NimbusApiError {
  override name = 'InvalidRequestError';
}
/** 401: the API key is missing, unknown, revoked or expired. */
export class AuthenticationError extends NimbusApiError {
  override name = 'AuthenticationError';
}
/** 402: the account is past due. */
export class PaymentRequiredError extends NimbusApiError {
  override name = 'PaymentRequiredError';
}
/** 403: `forbidden` (the key lacks a permission) or `quota_exceeded`. */
export class PermissionDeniedError extends NimbusApiError {
  override name = 'PermissionDeniedError';
}
/** 404: no such resource in this account (another account's resources are 404 too). */
export class NotFoundError extends NimbusApiError {
  override name = 'NotFoundError';
}
/** 409: the resource's state does not allow the action, or an Idempotency-Key is still in use. */
export class ConflictError extends NimbusApiError {
  override name = 'ConflictError';
}
/** 429: the rate limit, still exceeded after the SDK's retries; `retryAfter` says how long to wait. */
export class RateLimitError extends NimbusApiError {
  override name = 'RateLimitError';
}
/** 500: the server's own fault. */
export class ServerError extends NimbusApiError {
  override name = 'ServerError';
}
/** 503: temporarily unavailable (e.g. no capacity in the region), still so after the SDK's retries. */
export class ServiceUnavailableError extends NimbusApiError {
  override name = 'ServiceUnavailableError';
}

/** The class of an answer by its status; the statuses without one are NimbusApiError itself. */
export const ERROR_CLASS_BY_STATUS: Record<number, typeof NimbusApiError> = {
  400: InvalidRequestError,
  401: AuthenticationError,
  402: PaymentRequiredError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  429: RateLimitError,
  500: ServerError,
  503: ServiceUnavailableError,
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The error for a failed answer: its status, its parsed body (the error envelope, or anything else a
 * proxy may have sent) and its headers.
 */
export function apiErrorFrom(status: number, body: unknown, headers: Headers): NimbusApiError {
  const error = isRecord(body) && isRecord(body.error) ? body.error : {};
  const metadata = isRecord(body) && isRecord(body.metadata) ? body.metadata : {};
  const headerRetry = Number(headers.get('retry-after'));
  const fields: ApiErrorFields = {
    status,
    code: typeof error.code === 'string' ? error.code : `http_${status}`,
    message: typeof error.message === 'string' ? error.message : `HTTP ${status} without an error envelope`,
    requestId: typeof metadata.request_id === 'string' ? metadata.request_id : headers.get('x-request-id'),
    details: isRecord(error.details) ? error.details : null,
    retryAfter:
      typeof error.retry_after === 'number'
        ? error.retry_after
        : Number.isFinite(headerRetry) && headers.has('retry-after')
          ? headerRetry
          : null,
  };
  const Type = ERROR_CLASS_BY_STATUS[status] ?? NimbusApiError;
  return new Type(fields);
}

/** waitFor gave up: the resource did not reach the status in time. */
export class WaitTimeoutError extends NimbusError {
  override name = 'WaitTimeoutError';
  constructor(
    readonly resourceId: string,
    readonly wanted: string,
    /** The status last seen, or null when the resource was never read. */
    readonly lastStatus: string | null,
    timeoutMs: number,
  ) {
    super(
      `${resourceId} did not become ${wanted} within ${timeoutMs} ms (last seen: ${lastStatus ?? 'nothing'})`,
    );
  }
}

/** waitFor saw the resource end in a failed state (`error`, `failed`) it cannot leave by itself. */
export class ResourceFailedError extends NimbusError {
  override name = 'ResourceFailedError';
  constructor(
    readonly resourceId: string,
    readonly wanted: string,
    readonly status: string,
    /** The resource as last read. */
    readonly resource: unknown,
  ) {
    super(`${resourceId} is ${status}, so it will not become ${wanted}`);
  }
}
