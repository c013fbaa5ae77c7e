/**
 * Builders of the response envelopes (docs/design.md, "Envelope and errors"), so every handler answers in
 * the same shape.
 */
import type { FastifyRequest } from 'fastify';
import type { Page, Pagination } from '../domain/pagination.js';
import type { ErrorCode } from '../error-catalogue.js';
import { isoTimeNow } from '../wall-time.js';

function metadata(request: FastifyRequest) {
  return { request_id: request.id, timestamp: isoTimeNow() };
}

export function ok<T>(request: FastifyRequest, data: T) {
  return { success: true as const, data, metadata: metadata(request) };
}

/**
 * A list answer. Typed with numbered pagination, as the route schemas are written for /v1: on /v2 the
 * store's keyset pagination is replaced by signed cursors before serialisation (list-versions.ts).
 */
export function okList<T>(request: FastifyRequest, page: Page<T>) {
  return {
    success: true as const,
    data: page.items,
    pagination: page.pagination as Pagination,
    metadata: metadata(request),
  };
}

export interface ErrorExtras {
  details?: Record<string, unknown> | undefined;
  retry_after?: number | undefined;
}

export function errorBody(
  request: FastifyRequest,
  code: ErrorCode,
  message: string,
  extra: ErrorExtras = {},
) {
  return errorEnvelope(request.id, code, message, extra);
}

/** The error envelope for a request Fastify never made a request object for (early-errors.ts). */
export function errorEnvelope(requestId: string, code: ErrorCode, message: string, extra: ErrorExtras = {}) {
  return {
    success: false as const,
    error: {
      code,
      message,
      ...(extra.details ? { details: extra.details } : {}),
      ...(extra.retry_after !== undefined ? { retry_after: extra.retry_after } : {}),
    },
    metadata: { request_id: requestId, timestamp: isoTimeNow() },
  };
}

/** Longest string an error echoes back as `details.value`; the rest is cut off and marked with "…". */
export const MAX_ECHOED_CHARS = 256;

/** What an error may echo of a value the client sent: all of it, unless it is a long string. */
export function echoed(value: unknown): unknown {
  return typeof value === 'string' && value.length > MAX_ECHOED_CHARS
    ? `${value.slice(0, MAX_ECHOED_CHARS)}…`
    : value;
}
