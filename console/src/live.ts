/**
 * Live instance statuses (and metrics) from the WebSocket stream (docs/api.md, "Live metrics"), through
 * the SDK's stream client. The browser cannot set headers on a WebSocket, so the client authenticates
 * with its first message. A dropped stream reconnects with exponential backoff (1 s, 2 s, … 30 s) and
 * the state says so, for the page's banner.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  type AlertMessage,
  type MetricsMessage,
  MetricsStreamClosedError,
  openMetricsStream,
  type WebSocketConstructor,
} from '../../sdk/src/metrics-stream.ts';
import { session } from './session.ts';

export type { AlertMessage, MetricsMessage };

export type StreamState =
  | { kind: 'idle' }
  | { kind: 'connecting' }
  | { kind: 'live' }
  | { kind: 'reconnecting'; attempt: number; inSeconds: number }
  | { kind: 'refused'; message: string };

/** Close codes after which trying again cannot help (bad key, no permission, instance gone). */
const FINAL_CLOSE_CODES = new Set([1000, 4400, 4401, 4403, 4404]);
const MAX_BACKOFF_SECONDS = 30;

export interface LiveOptions {
  /** One instance's stream; otherwise the account-wide stream watching `instances`. */
  instanceId?: string;
  instances?: string[];
  /** Seconds between metrics messages; the list pages ask for the slowest (they only want statuses). */
  interval?: number;
  onMetrics?: (message: MetricsMessage) => void;
  /** An alert incident firing or resolving on a watched instance. */
  onAlert?: (message: AlertMessage) => void;
}

export interface Live {
  statuses: Record<string, string>;
  state: StreamState;
  /** Records a status the page learnt from an API answer (e.g. `stopping` after a stop). */
  setStatus: (instanceId: string, status: string) => void;
}

export function useLive(options: LiveOptions): Live {
  const [statuses, setStatuses] = useState<Record<string, string>>({});
  const [state, setState] = useState<StreamState>({ kind: 'idle' });
  const onMetrics = useRef(options.onMetrics);
  onMetrics.current = options.onMetrics;
  const onAlert = useRef(options.onAlert);
  onAlert.current = options.onAlert;
  const watched = options.instanceId ?? (options.instances ?? []).join(',');

  useEffect(() => {
    const apiKey = session.get()?.apiKey;
    if (!apiKey || watched === '') {
      setState({ kind: 'idle' });
      return;
    }
    let stopped = false;
    let attempt = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let close = () => {};

    const connect = () => {
      setState({ kind: 'connecting' });
      const stream = openMetricsStream({
        baseUrl: window.location.origin,
        apiKey,
        interval: options.interval ?? 60,
        WebSocket: window.WebSocket as unknown as WebSocketConstructor,
        ...(options.instanceId ? { instanceId: options.instanceId } : { instances: watched.split(',') }),
      });
      close = () => stream.close();
      stream.onStatus((message) =>
        setStatuses((known) => ({ ...known, [message.instance_id]: message.status })),
      );
      stream.onMetrics((message) => onMetrics.current?.(message));
      stream.onAlert((message) => onAlert.current?.(message));
      stream.ready.then(
        (ready) => {
          attempt = 0;
          setStatuses((known) => ({ ...known, ...ready.statuses }));
          setState({ kind: 'live' });
        },
        () => {},
      );
      void stream.closed.then(({ code }) => {
        if (stopped) return;
        if (FINAL_CLOSE_CODES.has(code)) {
          // The server's error message, when it sent one before closing.
          void stream.ready.catch((error: unknown) => {
            const detail = error instanceof MetricsStreamClosedError ? error.error?.message : undefined;
            setState({ kind: 'refused', message: detail ?? `the stream closed (${code})` });
          });
          if (code === 1000) setState({ kind: 'refused', message: 'the instance was deleted' });
          return;
        }
        attempt += 1;
        const inSeconds = Math.min(MAX_BACKOFF_SECONDS, 2 ** (attempt - 1));
        setState({ kind: 'reconnecting', attempt, inSeconds });
        timer = setTimeout(connect, inSeconds * 1000);
      });
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(timer);
      close();
    };
  }, [watched, options.instanceId, options.interval]);

  const setStatus = (instanceId: string, status: string) =>
    setStatuses((known) => ({ ...known, [instanceId]: status }));
  return { statuses, state, setStatus };
}
