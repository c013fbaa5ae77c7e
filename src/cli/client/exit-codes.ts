/**
 * Exit codes of the client commands, one per class of failure, so a script can tell "try again later"
 * from "fix the command" without reading stderr. Everything the CLI prints about a failure goes to stderr
 * as one line (see errors.ts).
 */
import {
  type ApiErrorCode,
  AuthenticationError,
  CertificateMismatchError,
  isApiErrorCode,
  MetricsStreamClosedError,
  NimbusApiError,
  NotFoundError,
  WaitTimeoutError,
} from '@nimbus/sdk';
import { isUntrustedCertificate } from './failure.js';

export const EXIT = {
  ok: 0,
  /** The API refused the request (validation, conflict, quota, rate limit after retries…) or failed. */
  apiError: 1,
  /** The command line itself is wrong (unknown command or option, missing argument, bad value). */
  usage: 2,
  /** No key, an unknown or revoked key, a key without the permission, or an untrusted server. */
  auth: 3,
  /** The resource does not exist (or belongs to another account). */
  notFound: 4,
  /** `--wait` gave up before the resource reached its status. */
  timeout: 5,
} as const;

type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * The exit code for each error code the API answers with. Every code of the SDK's list (the server's
 * catalogue, test/error-catalogue.test.ts) is decided here, so a new code does not compile until it is.
 */
export const EXIT_BY_API_CODE: Record<ApiErrorCode, ExitCode> = {
  invalid_request: EXIT.apiError,
  authentication_failed: EXIT.auth,
  payment_required: EXIT.apiError,
  forbidden: EXIT.auth,
  // 403 like `forbidden`, but not an authentication problem: the key is fine, the account is full.
  quota_exceeded: EXIT.apiError,
  not_found: EXIT.notFound,
  method_not_allowed: EXIT.apiError,
  request_timeout: EXIT.apiError,
  conflict: EXIT.apiError,
  idempotency_key_in_use: EXIT.apiError,
  payload_too_large: EXIT.apiError,
  idempotency_key_reused: EXIT.apiError,
  rate_limit_exceeded: EXIT.apiError,
  headers_too_large: EXIT.apiError,
  server_error: EXIT.apiError,
  service_unavailable: EXIT.apiError,
};

/** A mistake in how the command was called, found by the CLI itself (commander finds the rest). */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** No credentials, or a server the user did not trust: exits with EXIT.auth. */
export class NotLoggedInError extends Error {
  override name = 'NotLoggedInError';
}

/** The error and what caused it, outermost first (fetch wraps connection failures in "fetch failed"). */
function* causeChain(error: unknown): Generator<unknown> {
  for (
    let current = error;
    current !== undefined && current !== null;
    current = (current as { cause?: unknown }).cause
  ) {
    yield current;
  }
}

export function exitCodeFor(error: unknown): number {
  if (error instanceof UsageError) return EXIT.usage;
  if (error instanceof NotLoggedInError) return EXIT.auth;
  for (const cause of causeChain(error)) if (cause instanceof CertificateMismatchError) return EXIT.auth;
  if (isUntrustedCertificate(error)) return EXIT.auth;
  if (error instanceof NimbusApiError && isApiErrorCode(error.code)) return EXIT_BY_API_CODE[error.code];
  // An answer without the envelope (a proxy's): only its status tells what went wrong.
  if (error instanceof AuthenticationError) return EXIT.auth;
  if (error instanceof NotFoundError) return EXIT.notFound;
  if (error instanceof WaitTimeoutError) return EXIT.timeout;
  // A metric stream refused with a close code: 4401 bad key, 4403 no permission, 4404 no such instance.
  if (error instanceof MetricsStreamClosedError) {
    if (error.code === 4401 || error.code === 4403) return EXIT.auth;
    if (error.code === 4404) return EXIT.notFound;
    return EXIT.apiError;
  }
  if (error instanceof NimbusApiError) return EXIT.apiError;
  return EXIT.apiError;
}
