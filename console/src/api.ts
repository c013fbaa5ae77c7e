/**
 * The console's only way to the server: the public REST API through openapi-fetch, typed by the SDK's
 * generated paths (sdk/src/generated/v1.ts), exactly what a user's own script could call. The key goes
 * in `Authorization: Bearer`; every answer's X-RateLimit-* headers feed the header's rate-limit status.
 */
import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from '../../sdk/src/generated/v1.ts';
import { signal } from './signal.ts';

// Which action a resource accepts in which status: the server's state tables as its document publishes
// them, never a copy of the rules (sdk/src/states.ts).
export {
  allows,
  isTransitional,
  STATE_TABLES,
  type StateAction,
  snapshotSourceAllows,
} from '../../sdk/src/states.ts';

export type Schemas = components['schemas'];
export type Instance = Schemas['Instance'];
export type ApiKey = Schemas['ApiKey'];
export type Account = Schemas['Account'];
export type InstanceStatus = Instance['status'];

/** The API's error envelope, kept whole so pages can show its message and request id. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface RateLimitStatus {
  limit: number;
  remaining: number;
  /** Unix seconds when the budget refills. */
  reset: number;
}

/** Latest X-RateLimit-* values seen on any answer. */
export const rateLimit = signal<RateLimitStatus | null>(null);

export type Api = ReturnType<typeof createApi>;

/**
 * `onUnauthorized` runs when any answer is 401: the key was revoked or expired while in use (the sign-in
 * form passes none, so a bad key there is just an error shown on the form).
 */
export function createApi(apiKey: string, onUnauthorized?: () => void) {
  const client = createClient<paths>({ baseUrl: window.location.origin });
  const auth: Middleware = {
    onRequest({ request }) {
      request.headers.set('authorization', `Bearer ${apiKey}`);
      return request;
    },
    onResponse({ response }) {
      if (response.status === 401) onUnauthorized?.();
      const limit = Number(response.headers.get('x-ratelimit-limit'));
      if (response.headers.has('x-ratelimit-limit')) {
        rateLimit.set({
          limit,
          remaining: Number(response.headers.get('x-ratelimit-remaining')),
          reset: Number(response.headers.get('x-ratelimit-reset')),
        });
      }
      return response;
    },
  };
  client.use(auth);
  return client;
}

interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The answer's data, or an ApiError carrying the envelope's message and request id. */
export async function unwrap<T>(pending: Promise<FetchResult<T>>): Promise<T> {
  let result: FetchResult<T>;
  try {
    result = await pending;
  } catch (error) {
    throw new ApiError(0, 'network', `The server could not be reached: ${(error as Error).message}`, null);
  }
  if (result.error === undefined && result.response.ok) return result.data as T;
  const envelope = result.error as Partial<Schemas['ErrorEnvelope']> | undefined;
  throw new ApiError(
    result.response.status,
    envelope?.error?.code ?? 'http_error',
    envelope?.error?.message ?? `The server answered ${result.response.status}`,
    envelope?.metadata?.request_id ?? result.response.headers.get('x-request-id'),
  );
}
