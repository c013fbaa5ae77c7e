/**
 * The one error type services throw. Each subclass has a stable machine code from the error catalogue
 * (platform/error-catalogue.ts), which also gives the HTTP layer its status, so services never speak HTTP.
 */
import { type ErrorCode, isErrorCode } from './error-catalogue.js';

export type ErrorDetails = Record<string, unknown>;

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetails,
  ) {
    // Only a cast gets an unlisted code this far: fail here, as the unexpected error it is (a logged
    // server_error), rather than answer with a code no client was told about.
    if (!isErrorCode(code)) throw new TypeError(`${code} is not in the error catalogue`);
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidRequest extends DomainError {
  constructor(
    message: string,
    details?: { field?: string; value?: unknown; allowed_values?: unknown[] } & ErrorDetails,
  ) {
    super('invalid_request', message, details);
  }
}

export class AuthenticationFailed extends DomainError {
  constructor(message = 'Invalid API key') {
    super('authentication_failed', message);
  }
}

export class Forbidden extends DomainError {
  constructor(message: string, details?: ErrorDetails) {
    super('forbidden', message, details);
  }
}

/** Resources as `details.resource` names them (stable, machine-readable), with their names in messages. */
const RESOURCE_LABELS = {
  account: 'Account',
  api_key: 'API key',
  instance: 'Instance',
  volume: 'Volume',
  snapshot: 'Snapshot',
  webhook: 'Webhook',
  delivery: 'Delivery',
  ssh_key: 'SSH key',
  vpn: 'VPN',
  vpn_peer: 'VPN peer',
  public_ip: 'Public IP',
  firewall_rule: 'Firewall rule',
  event: 'Event',
  invoice: 'Invoice',
  alert: 'Alert policy',
  incident: 'Incident',
} as const;
export type ResourceKind = keyof typeof RESOURCE_LABELS;

export class NotFound extends DomainError {
  /** `field`: the body field that named the resource, when it was not the path's. */
  constructor(resource: ResourceKind, id: string, where?: { field: string }) {
    super(
      'not_found',
      `${RESOURCE_LABELS[resource]} ${id} not found${where ? ` (${where.field})` : ''}`,
      where ? { resource, id, field: where.field } : { resource, id },
    );
  }
}

export class Conflict extends DomainError {
  constructor(message: string, details?: ErrorDetails) {
    super('conflict', message, details);
  }
}

export class QuotaExceeded extends DomainError {
  constructor(quota: string, limit: number, used: number, requested: number) {
    super('quota_exceeded', `Quota ${quota} exceeded: limit ${limit}, used ${used}, requested ${requested}`, {
      quota,
      limit,
      used,
      requested,
    });
  }
}

export class PaymentRequired extends DomainError {
  constructor(message: string) {
    super('payment_required', message);
  }
}

export class RateLimitExceeded extends DomainError {
  constructor(readonly retryAfterSeconds: number) {
    super('rate_limit_exceeded', `Rate limit exceeded, retry in ${retryAfterSeconds} seconds`);
  }
}

export class IdempotencyKeyReused extends DomainError {
  constructor() {
    super(
      'idempotency_key_reused',
      'This Idempotency-Key was already used with a different request; use a new key for a new request',
    );
  }
}

export class IdempotencyKeyInUse extends DomainError {
  constructor() {
    super(
      'idempotency_key_in_use',
      'A request with this Idempotency-Key is still being processed; retry shortly',
    );
  }
}

export class ServiceUnavailable extends DomainError {
  constructor(message: string, details?: ErrorDetails) {
    super('service_unavailable', message, details);
  }
}
