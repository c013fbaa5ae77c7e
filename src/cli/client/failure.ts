/**
 * A failure as the one line the CLI prints on stderr: what went wrong, the API's code, its details and
 * the request id to quote when asking for help, e.g.
 *   Error: Instance ins_123 not found (code: not_found, details: {"id":"ins_123"}, request_id: req_456)
 */
import {
  MetricsStreamClosedError,
  NimbusApiError,
  ResourceFailedError,
  STREAM_CLOSE_CODES,
} from '@nimbus/sdk';

/** TLS verification codes that mean "this server's certificate is not trusted here". */
const UNTRUSTED_CERTIFICATE = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_HAS_EXPIRED',
]);

/** The innermost cause of a network failure (undici's fetch throws "fetch failed" with a cause). */
function rootCause(error: unknown): { code?: string; message: string } | null {
  let current = error as { cause?: unknown; code?: string; message?: string } | undefined;
  while (current && typeof current === 'object' && current.cause && typeof current.cause === 'object') {
    current = current.cause as typeof current;
  }
  return current && current !== error ? { code: current.code, message: String(current.message) } : null;
}

export function isUntrustedCertificate(error: unknown): boolean {
  const cause = rootCause(error);
  return cause?.code !== undefined && UNTRUSTED_CERTIFICATE.has(cause.code);
}

export function describeFailure(error: unknown, baseUrl: string | null): string {
  if (error instanceof NimbusApiError) {
    const parts = [`code: ${error.code}`];
    if (error.details) parts.push(`details: ${JSON.stringify(error.details)}`);
    if (error.retryAfter !== null) parts.push(`retry_after: ${error.retryAfter}`);
    parts.push(`request_id: ${error.requestId ?? '-'}`);
    return `Error: ${error.apiMessage} (${parts.join(', ')})`;
  }
  if (error instanceof MetricsStreamClosedError) {
    // The stream's own error message (sent before the close) when there was one, else what the code means.
    const meaning = STREAM_CLOSE_CODES[error.code as keyof typeof STREAM_CLOSE_CODES];
    const message = error.error?.message ?? (error.reason || meaning || error.message);
    const parts = [`code: ${error.error?.code ?? 'stream_closed'}`, `close code: ${error.code}`];
    if (error.error?.details) parts.push(`details: ${JSON.stringify(error.error.details)}`);
    return `Error: metric stream closed: ${message} (${parts.join(', ')})`;
  }
  if (error instanceof ResourceFailedError) {
    return `Error: ${error.message} (code: resource_${error.status})`;
  }
  const cause = rootCause(error);
  if (cause) {
    const where = baseUrl ? ` ${baseUrl}` : ' the server';
    const hint = isUntrustedCertificate(error)
      ? '; run "nimbus login" to check and trust its certificate, or set NIMBUS_CA_FILE'
      : '';
    return `Error: cannot reach${where}: ${cause.message}${cause.code ? ` (code: ${cause.code})` : ''}${hint}`;
  }
  return `Error: ${error instanceof Error ? error.message : String(error)}`;
}
