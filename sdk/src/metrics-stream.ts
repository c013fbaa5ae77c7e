/**
 * A typed client for Nimbus's live metric streams (docs/api.md, "Live metrics"): one instance
 * (`/v1/instances/{id}/metrics/stream`) or up to 100 of the account's (`/v1/metrics/stream`).
 *
 *   import WebSocket from 'ws';
 *   const stream = openMetricsStream({ baseUrl, apiKey, instanceId, interval: 1, WebSocket, socketOptions: { ca } });
 *   stream.onMetrics((m) => console.log(m.timestamp, m.cpu_percent));
 *   stream.onStatus((s) => console.log(s.status));
 *   stream.onAlert((a) => console.log(a.event, a.name, a.value));
 *   await stream.ready;
 *   …
 *   stream.close();
 *
 * The SDK has no WebSocket dependency of its own: pass the `ws` package's class on Node (20 has no global
 * WebSocket) or `globalThis.WebSocket` in a browser. It authenticates with the first message, which works
 * in both, and sends the subscription once admitted.
 */

export type StreamMetricName =
  | 'cpu_percent'
  | 'memory_used_bytes'
  | 'memory_total_bytes'
  | 'disk_read_bps'
  | 'disk_write_bps'
  | 'net_rx_bps'
  | 'net_tx_bps'
  | 'gpu_percent';

export interface ReadyMessage {
  type: 'ready' | 'subscribed';
  interval: number;
  instances: string[];
  statuses: Record<string, string>;
}

export type MetricsMessage = {
  type: 'metrics';
  instance_id: string;
  timestamp: string;
  /** Samples this socket missed since the previous message because it read too slowly. */
  dropped?: number;
} & Partial<Record<StreamMetricName, number>>;

export interface StatusMessage {
  type: 'status';
  instance_id: string;
  status: string;
  event: string;
  timestamp: string;
  dropped?: number;
}

/** An alert incident firing or resolving on a watched instance (the `alert.firing` / `alert.resolved` event). */
export interface AlertMessage {
  type: 'alert';
  event: 'alert.firing' | 'alert.resolved';
  instance_id: string;
  /** The alert policy (`alr_…`). */
  policy_id: string;
  incident_id: string;
  /** The policy's name. */
  name: string;
  /** A metric policy's metric, compare and window; null for a state policy. */
  metric: string | null;
  compare: 'above' | 'below' | null;
  /** A state policy's state (`error`, `stuck`); null for a metric policy. */
  state: string | null;
  window: string | null;
  /** The window's average that crossed (firing) or came back (resolved); null for a state policy's firing. */
  value: number | null;
  threshold: number | null;
  started_at: string;
  resolved_at: string | null;
  /** When the transition was recorded. */
  timestamp: string;
  dropped?: number;
}

export interface StreamErrorMessage {
  type: 'error';
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

/** Close codes of the protocol. */
export const STREAM_CLOSE_CODES = {
  4400: 'bad message',
  4401: 'bad or missing API key',
  4403: 'missing monitoring:read, or account suspended',
  4404: 'instance not found',
  4429: 'rate limited, or too many streams',
} as const;

/** The part of a WebSocket (browser or `ws`) this client uses. */
export interface WebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

export type WebSocketConstructor = new (url: string, options?: never) => WebSocketLike;

export interface MetricsStreamOptions {
  /** https://… of the API; the stream connects to the same host with wss://. */
  baseUrl: string;
  apiKey: string;
  /** One instance; without it, the account-wide stream watching `instances`. */
  instanceId?: string;
  instances?: string[];
  /** Seconds between metrics messages, 1–60 (server default 5). */
  interval?: number;
  metrics?: StreamMetricName[];
  WebSocket: WebSocketConstructor;
  /** Second argument of the constructor, for `ws` (e.g. `{ ca }` for a self-signed server). */
  socketOptions?: Record<string, unknown>;
}

export class MetricsStreamClosedError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    readonly error: StreamErrorMessage | null,
  ) {
    super(`metric stream closed with ${code}${reason ? `: ${reason}` : ''}`);
    this.name = 'MetricsStreamClosedError';
  }
}

export interface MetricsStream {
  /** Resolves once admitted and subscribed; rejects with MetricsStreamClosedError when refused. */
  ready: Promise<ReadyMessage>;
  /** Resolves when the socket closes, with the code (4xxx: see STREAM_CLOSE_CODES). */
  closed: Promise<{ code: number; reason: string }>;
  onMetrics(handler: (message: MetricsMessage) => void): void;
  onStatus(handler: (message: StatusMessage) => void): void;
  /** Alert incidents of the account's policies firing or resolving on the watched instances. */
  onAlert(handler: (message: AlertMessage) => void): void;
  /** Changes the interval, metrics or (account-wide) instances; resolves with the server's confirmation. */
  subscribe(change: {
    interval?: number;
    metrics?: StreamMetricName[];
    instances?: string[];
  }): Promise<ReadyMessage>;
  close(): void;
}

export function streamUrl(baseUrl: string, instanceId?: string): string {
  const url = new URL(
    instanceId ? `/v1/instances/${encodeURIComponent(instanceId)}/metrics/stream` : '/v1/metrics/stream',
    baseUrl,
  );
  url.protocol = url.protocol === 'http:' ? 'ws:' : 'wss:';
  return url.toString();
}

export function openMetricsStream(options: MetricsStreamOptions): MetricsStream {
  const Socket = options.WebSocket as unknown as new (url: string, options?: unknown) => WebSocketLike;
  const socket = options.socketOptions
    ? new Socket(streamUrl(options.baseUrl, options.instanceId), options.socketOptions)
    : new Socket(streamUrl(options.baseUrl, options.instanceId));
  const metricsHandlers: ((message: MetricsMessage) => void)[] = [];
  const statusHandlers: ((message: StatusMessage) => void)[] = [];
  const alertHandlers: ((message: AlertMessage) => void)[] = [];
  let confirm: ((message: ReadyMessage) => void)[] = [];
  let lastError: StreamErrorMessage | null = null;
  let resolveReady: (message: ReadyMessage) => void = () => {};
  let rejectReady: (error: Error) => void = () => {};
  const ready = new Promise<ReadyMessage>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  ready.catch(() => {});
  const initial: Record<string, unknown> = {};
  if (options.interval !== undefined) initial.interval = options.interval;
  if (options.metrics !== undefined) initial.metrics = options.metrics;
  if (!options.instanceId && options.instances !== undefined) initial.instances = options.instances;

  const send = (message: Record<string, unknown>) => socket.send(JSON.stringify(message));
  const subscribe = (change: Record<string, unknown>) =>
    new Promise<ReadyMessage>((resolve) => {
      confirm.push(resolve);
      send({ type: 'subscribe', ...change });
    });

  socket.onopen = () => send({ type: 'auth', api_key: options.apiKey });
  socket.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as { type: string };
    switch (message.type) {
      case 'ready':
        if (Object.keys(initial).length === 0) resolveReady(message as ReadyMessage);
        else void subscribe(initial).then(resolveReady);
        break;
      case 'subscribed':
        confirm.shift()?.(message as ReadyMessage);
        break;
      case 'metrics':
        for (const handler of metricsHandlers) handler(message as MetricsMessage);
        break;
      case 'status':
        for (const handler of statusHandlers) handler(message as StatusMessage);
        break;
      case 'alert':
        for (const handler of alertHandlers) handler(message as AlertMessage);
        break;
      case 'error':
        lastError = message as StreamErrorMessage;
        break;
    }
  };
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    socket.onclose = (event) => {
      rejectReady(new MetricsStreamClosedError(event.code, event.reason, lastError));
      confirm = [];
      resolve({ code: event.code, reason: event.reason });
    };
  });
  socket.onerror = () => {
    // The close that follows reports what happened.
  };
  return {
    ready,
    closed,
    onMetrics: (handler) => {
      metricsHandlers.push(handler);
    },
    onStatus: (handler) => {
      statusHandlers.push(handler);
    },
    onAlert: (handler) => {
      alertHandlers.push(handler);
    },
    subscribe: (change) => subscribe(change),
    close: () => socket.close(1000, 'client closed'),
  };
}
