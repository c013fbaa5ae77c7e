/**
 * What every suite needs and none should write again: waiting (polling for a condition, or a deliberate
 * pause), an account that the rate limit leaves alone, and the error-envelope assertions.
 */

import { expect } from 'vitest';
import type { ErrorCode } from '../../src/platform/error-catalogue.js';
import type { Reply, TestServer } from './server.js';

/**
 * A deliberate pause. Only for showing that something does NOT happen within a time (a stuck instance
 * stays stuck) or for spacing timestamps apart; to wait for something to happen, use waitFor.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** What was last seen, for the message on timeout. */
  lastSeen?: () => string;
}

/**
 * Polls `probe` until it returns something other than undefined, and returns that. On timeout it fails
 * naming `what` and what was last seen, so the failure says how far things got.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  { timeoutMs = 10_000, intervalMs = 15, lastSeen }: WaitOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() >= deadline) {
      const seen = lastSeen?.();
      throw new Error(`${what}: not within ${timeoutMs} ms${seen ? ` (last seen: ${seen})` : ''}`);
    }
    await sleep(intervalMs);
  }
}

/** An account (all permissions) whose rate limit never gets in the way of a test. */
export function account(server: TestServer, plan = 'professional'): Promise<{ id: string; key: string }> {
  return server.createAccount({ plan, perHour: 1_000_000, burst: 100_000 });
}

/**
 * The error envelope (docs/design.md, "Envelope and errors") with `code`: a message, the request's metadata,
 * and no stack trace.
 */
export function expectErrorEnvelope(body: any, code: ErrorCode): void {
  expect(body).toMatchObject({ success: false, error: { code, message: expect.any(String) } });
  expect(body.metadata.request_id).toMatch(/^req_/);
  expect(typeof body.metadata.timestamp).toBe('string');
  expect(JSON.stringify(body)).not.toMatch(/\bat .*\.(js|ts):\d+/);
}

/** A failure with this status and code in the error envelope; returns `error` for further checks. */
export function expectError(
  reply: Reply,
  status: number,
  code: ErrorCode,
): { code: string; message: string; details?: Record<string, any>; retry_after?: number } {
  expect(reply.status, reply.text).toBe(status);
  expectErrorEnvelope(reply.body, code);
  return reply.body.error;
}

/** A 400 invalid_request naming `field` in its details. */
export function expectInvalid(reply: Reply, field: string): void {
  expect(expectError(reply, 400, 'invalid_request').details?.field, reply.text).toBe(field);
}
