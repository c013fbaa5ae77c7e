/** Builders of the SPEC.md response envelopes, so every handler answers in the same shape. */
import type { FastifyRequest } from 'fastify';
import { isoTimeNow } from '../domain/clock.js';
import type { Page } from '../domain/pagination.js';

function metadata(request: FastifyRequest) {
  return { request_id: request.id, timestamp: isoTimeNow() };
}

export function ok<T>(request: FastifyRequest, data: T) {
  return { success: true as const, data, metadata: metadata(request) };
}

export function okList<T>(request: FastifyRequest, page: Page<T>) {
  return {
    success: true as const,
    data: page.items,
    pagination: page.pagination,
    metadata: metadata(request),
  };
}

export function errorBody(
  request: FastifyRequest,
  code: string,
  message: string,
  extra: { details?: Record<string, unknown> | undefined; retry_after?: number | undefined } = {},
) {
  return {
    success: false as const,
    error: {
      code,
      message,
      ...(extra.details ? { details: extra.details } : {}),
      ...(extra.retry_after !== undefined ? { retry_after: extra.retry_after } : {}),
    },
    metadata: metadata(request),
  };
}
