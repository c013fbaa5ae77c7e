/**
 * The Nimbus client: openapi-fetch over the types generated from openapi/v1.json, sent through undici
 * (so a private CA can be trusted per client) and retryingFetch (429/503 retries, Idempotency-Key), with
 * failures turned into the typed errors of errors.ts. On top: list pagination and waiting for a status.
 */
import { readFileSync } from 'node:fs';
import createClient, {
  type Client,
  type ClientPathsWithMethod,
  type MaybeOptionalInit,
  type MethodResponse,
} from 'openapi-fetch';
import { Agent, Request as UndiciRequest, fetch as undiciFetch } from 'undici';
import { apiErrorFrom, NimbusError, NotFoundError, ResourceFailedError, WaitTimeoutError } from './errors.js';
import type { components, paths } from './generated/v1.js';
import { pinnedConnector } from './pinning.js';
import { type RetryOptions, retryingFetch } from './retry.js';

export const DEFAULT_BASE_URL = 'https://localhost:8443';

export interface NimbusOptions {
  /** The API key; default: the environment variable NIMBUS_API_KEY. */
  apiKey?: string;
  /** The server's root URL, without /v1; default: NIMBUS_URL, else https://localhost:8443. */
  baseUrl?: string;
  /**
   * PEM of the CA (or the self-signed certificate) to trust besides the system's; default: the file
   * named by NIMBUS_CA_FILE, else none.
   */
  ca?: string | Buffer;
  /**
   * SHA-256 fingerprint of the one server certificate to accept (hex, colons optional), instead of
   * verifying a chain: how a client trusts a self-signed server it was shown once, as SSH pins host keys.
   * Default: NIMBUS_TLS_FINGERPRINT, else none. Takes precedence over `ca`.
   */
  fingerprint?: string;
  /** Retries of 429 and 503 (see retry.ts). */
  retry?: RetryOptions;
}

/** The generated operations as openapi-fetch sees them. */
export type NimbusApi = Client<paths, 'application/json'>;
type Method = 'get' | 'post' | 'patch' | 'delete';
/** The paths that have method M. */
export type PathsWith<M extends Method> = ClientPathsWithMethod<NimbusApi, M>;
/** What a call of M on P may take: path and query parameters, body, headers. */
export type RequestInit<P extends keyof paths, M extends keyof paths[P]> = MaybeOptionalInit<paths[P], M>;
type InitArgs<P extends keyof paths, M extends keyof paths[P]> =
  undefined extends RequestInit<P, M> ? [init?: RequestInit<P, M>] : [init: RequestInit<P, M>];
/** The successful answer's body (the envelope) of M on P. */
export type ResponseBody<M extends Method, P extends PathsWith<M>> = MethodResponse<NimbusApi, M, P>;

/** The GET paths that answer a page: a `data` array and `pagination`. */
export type ListPath = {
  [P in PathsWith<'get'>]: ResponseBody<'get', P> extends { data: readonly unknown[]; pagination: unknown }
    ? P
    : never;
}[PathsWith<'get'>];
/** One item of a list path's pages. */
export type ListItem<P extends ListPath> =
  ResponseBody<'get', P> extends { data: readonly (infer T)[] } ? T : never;

type Schemas = components['schemas'];
type SchemaIfPresent<N extends string> = N extends keyof Schemas ? Schemas[N] : never;
/**
 * What waitFor can wait for: the resources with a status whose schemas the document has (instances and
 * volumes; snapshots and VPNs as soon as their routes are in openapi/v1.json).
 */
export type WaitableResource =
  | SchemaIfPresent<'Instance'>
  | SchemaIfPresent<'Volume'>
  | SchemaIfPresent<'Snapshot'>
  | SchemaIfPresent<'Vpn'>;

/** Where each waitable resource is read, by the prefix of its id. */
const RESOURCE_PATHS: ReadonlyArray<readonly [prefix: string, path: string]> = [
  ['ins_', '/v1/instances/{id}'],
  ['vol_', '/v1/volumes/{id}'],
  ['snap_', '/v1/snapshots/{id}'],
  ['vpn_', '/v1/vpn/{id}'],
];

/** Statuses a resource does not leave by itself: waiting for another one fails at once. */
const FAILED_STATUSES: ReadonlySet<string> = new Set(['error', 'failed']);

export interface WaitOptions {
  /** Give up after this many milliseconds (default 300000, five minutes). */
  timeoutMs?: number;
  /** Time between reads in milliseconds (default 1000). */
  intervalMs?: number;
  /** Told each time the resource has been read (a progress display shows its status). */
  onPoll?: (resource: WaitableResource) => void;
}

/** Each page asks for the most the API gives (100) unless the caller's query sets `limit`. */
const PAGE_LIMIT = 100;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class Nimbus {
  /**
   * Every operation of openapi/v1.json, typed (openapi-fetch): `nimbus.api.GET('/v1/instances/{id}',
   * {params: {path: {id}}})`. A failure throws a NimbusApiError, so a returned `data` is always set.
   */
  readonly api: NimbusApi;
  readonly baseUrl: string;
  private readonly agent: Agent;

  constructor(options: NimbusOptions = {}) {
    const apiKey = options.apiKey ?? process.env.NIMBUS_API_KEY;
    if (!apiKey) throw new NimbusError('No API key: pass apiKey or set NIMBUS_API_KEY');
    this.baseUrl = (options.baseUrl ?? process.env.NIMBUS_URL ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    const caFile = process.env.NIMBUS_CA_FILE;
    const ca = options.ca ?? (caFile ? readFileSync(caFile) : undefined);
    const fingerprint = options.fingerprint ?? process.env.NIMBUS_TLS_FINGERPRINT;
    this.agent = new Agent(
      fingerprint ? { connect: pinnedConnector(fingerprint) } : ca === undefined ? {} : { connect: { ca } },
    );
    const agent = this.agent;
    // undici's own fetch and Request, so the dispatcher (and its CA) is the one this client made.
    const send = (request: Request) =>
      undiciFetch(request as unknown as UndiciRequest, { dispatcher: agent }) as unknown as Promise<Response>;
    this.api = createClient<paths, 'application/json'>({
      baseUrl: this.baseUrl,
      Request: UndiciRequest as unknown as typeof Request,
      fetch: retryingFetch(send, options.retry),
      headers: { authorization: `Bearer ${apiKey}` },
    });
    this.api.use({
      async onResponse({ response }) {
        if (response.ok) return undefined;
        const text = await response.text();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not the envelope (a proxy's page?): apiErrorFrom says so
        }
        throw apiErrorFrom(response.status, body, response.headers);
      },
    });
  }

  /** GET `path`; returns the envelope (`data`, `metadata`, and `pagination` on lists). */
  get<P extends PathsWith<'get'>>(path: P, ...init: InitArgs<P, 'get'>): Promise<ResponseBody<'get', P>> {
    return this.call('GET', path, init[0]);
  }

  /** POST `path` (with an Idempotency-Key of its own unless `headers` has one). */
  post<P extends PathsWith<'post'>>(path: P, ...init: InitArgs<P, 'post'>): Promise<ResponseBody<'post', P>> {
    return this.call('POST', path, init[0]);
  }

  patch<P extends PathsWith<'patch'>>(
    path: P,
    ...init: InitArgs<P, 'patch'>
  ): Promise<ResponseBody<'patch', P>> {
    return this.call('PATCH', path, init[0]);
  }

  delete<P extends PathsWith<'delete'>>(
    path: P,
    ...init: InitArgs<P, 'delete'>
  ): Promise<ResponseBody<'delete', P>> {
    return this.call('DELETE', path, init[0]);
  }

  /**
   * Every item of a list, page after page (100 a page unless `limit` is given), for `for await`.
   * Pages are numbered, so items created or deleted while it runs can shift one page's worth of items
   * into the next page (seen twice) or out of it (missed); sort by `created_at` `asc` to only ever append.
   */
  async *paginate<P extends ListPath>(path: P, ...init: InitArgs<P, 'get'>): AsyncGenerator<ListItem<P>> {
    const given = (init[0] ?? {}) as { params?: { query?: Record<string, unknown> } };
    let page = Number(given.params?.query?.page ?? 1);
    for (;;) {
      const query = { limit: PAGE_LIMIT, ...given.params?.query, page };
      const body = (await this.call('GET', path, { ...given, params: { ...given.params, query } })) as {
        data: ListItem<P>[];
        pagination: { has_next: boolean };
      };
      yield* body.data;
      if (!body.pagination.has_next) return;
      page += 1;
    }
  }

  /**
   * Reads the resource (an instance, a volume, a snapshot or a VPN, by its id's prefix) until its status
   * is `status`, and returns it as last read. `'deleted'` waits until it is gone (404). Fails at once with
   * ResourceFailedError when it is `error` or `failed` instead, and with WaitTimeoutError after
   * `timeoutMs`.
   */
  async waitFor<R extends WaitableResource>(
    resource: R,
    status: R['status'] | 'deleted',
    options?: WaitOptions,
  ): Promise<R>;
  async waitFor(resourceId: string, status: string, options?: WaitOptions): Promise<WaitableResource>;
  async waitFor(
    resource: WaitableResource | string,
    status: string,
    { timeoutMs = 300_000, intervalMs = 1000, onPoll }: WaitOptions = {},
  ): Promise<WaitableResource | null> {
    const id = typeof resource === 'string' ? resource : resource.id;
    const path = RESOURCE_PATHS.find(([prefix]) => id.startsWith(prefix))?.[1];
    if (!path) {
      throw new NimbusError(`waitFor: ${id} is not an instance, volume, snapshot or VPN id`);
    }
    const deadline = Date.now() + timeoutMs;
    let last: WaitableResource | null = null;
    for (;;) {
      try {
        const body = (await this.call('GET', path, { params: { path: { id } } })) as {
          data: WaitableResource;
        };
        last = body.data;
        onPoll?.(last);
      } catch (error) {
        // Gone, and that was the wish: only a 404 that names this very resource counts, not a missing route.
        if (status === 'deleted' && error instanceof NotFoundError && error.details?.id === id) return last;
        throw error;
      }
      if (last.status === status) return last;
      if (FAILED_STATUSES.has(last.status)) throw new ResourceFailedError(id, status, last.status, last);
      if (Date.now() >= deadline) throw new WaitTimeoutError(id, status, last.status, timeoutMs);
      await sleep(Math.max(0, Math.min(intervalMs, deadline - Date.now())));
    }
  }

  /** Closes the client's connections. */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /** One call through openapi-fetch, whose path and init types the public methods have already checked. */
  private async call<T>(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    init: unknown,
  ): Promise<T> {
    const request = this.api.request as unknown as (
      method: string,
      path: string,
      init?: unknown,
    ) => Promise<{ data?: unknown }>;
    const { data } = await request(method, path, init);
    return data as T;
  }
}
