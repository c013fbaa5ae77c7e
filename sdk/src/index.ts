/**
 * @nimbus/sdk: a typed client for the Nimbus API.
 *
 *   const nimbus = new Nimbus(); // NIMBUS_API_KEY, NIMBUS_URL, NIMBUS_CA_FILE
 *   const { data: instance } = await nimbus.post('/v1/instances', { body: { name, instance_type, region, image } });
 *   await nimbus.waitFor(instance, 'running');
 *   for await (const key of nimbus.paginate('/v1/ssh-keys')) console.log(key.name);
 */
export {
  DEFAULT_BASE_URL,
  type ListItem,
  type ListPath,
  Nimbus,
  type NimbusApi,
  type NimbusOptions,
  type PathsWith,
  type RequestInit,
  type ResponseBody,
  type WaitableResource,
  type WaitOptions,
} from './client.js';
export {
  API_ERROR_CODES,
  type ApiErrorCode,
  type ApiErrorFields,
  AuthenticationError,
  ConflictError,
  InvalidRequestError,
  isApiErrorCode,
  NimbusApiError,
  NimbusError,
  NotFoundError,
  PaymentRequiredError,
  PermissionDeniedError,
  RateLimitError,
  ResourceFailedError,
  ServerError,
  ServiceUnavailableError,
  WaitTimeoutError,
} from './errors.js';
export type { components, operations, paths } from './generated/v1.js';
export {
  type AlertMessage,
  type MetricsMessage,
  type MetricsStream,
  MetricsStreamClosedError,
  type MetricsStreamOptions,
  openMetricsStream,
  type ReadyMessage,
  STREAM_CLOSE_CODES,
  type StatusMessage,
  type StreamMetricName,
  streamUrl,
  type WebSocketConstructor,
  type WebSocketLike,
} from './metrics-stream.js';
export { CertificateMismatchError, normalizeFingerprint } from './pinning.js';
export { type RetryInfo, type RetryOptions, retryDelay, retryPolicy } from './retry.js';
export {
  allowedActions,
  allows,
  isTransitional,
  STATE_TABLES,
  type StateAction,
  type StatefulKind,
  type StateStatus,
  snapshotSourceAllows,
  targetOf,
} from './states.js';
