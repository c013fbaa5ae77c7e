/**
 * `nimbus metrics …`: an instance's metric history (`get`, a table of its series) and its live values
 * (`watch`, drawn in place on a terminal from the WebSocket stream through the SDK's openMetricsStream;
 * one line per message when the output is a pipe or a file).
 */
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import {
  CertificateMismatchError,
  type MetricsMessage,
  MetricsStreamClosedError,
  normalizeFingerprint,
  openMetricsStream,
  type StatusMessage,
  type StreamMetricName,
  type WebSocketConstructor,
} from '@nimbus/sdk';
import { Command, InvalidArgumentError, Option } from 'commander';
import WebSocket, { type ClientOptions } from 'ws';
import YAML from 'yaml';
import { METRIC_NAMES as SERVER_METRIC_NAMES } from '../../../resources/metrics/catalog.js';
import { note } from '../context.js';
import { UsageError } from '../exit-codes.js';
import { type Column, printList, printOne } from '../output.js';
import { type Session, withSession } from '../session.js';
import { addCommands, defined, example, integer, resolveId } from './shared.js';

const INSTANCE = { prefix: 'ins_', path: '/v1/instances', noun: 'instance' } as const;

/**
 * The metrics in the server's catalogue order. The SDK has their names only as a type; the client ships
 * with the server, and the catalogue module has nothing to load at run time, so it is read where the
 * server defines it. Typed as the stream's names, so the two cannot drift apart unnoticed.
 */
const METRIC_NAMES: readonly StreamMetricName[] = SERVER_METRIC_NAMES;

/** `cpu_percent,net_rx_bps` (or the option repeated) as a list; the server judges the names. */
function metricList(value: string, previous: string[] | undefined): string[] {
  const names = value
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  if (names.length === 0) throw new InvalidArgumentError('expected metric names, comma-separated');
  return [...(previous ?? []), ...names];
}

const AGO_UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** An ISO 8601 time as it is, or a time ago such as `30m`, `6h`, `7d` as the ISO time it names. */
export function parseTime(value: string, now = Date.now()): string {
  const ago = /^(\d+)([smhd])$/.exec(value);
  if (ago) return new Date(now - Number(ago[1]) * AGO_UNITS[ago[2]!]!).toISOString();
  if (Number.isNaN(Date.parse(value))) {
    throw new InvalidArgumentError('expected an ISO 8601 time, or a time ago such as 30m, 6h or 7d');
  }
  return value;
}

const BINARY_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
const RATE_UNITS = ['B/s', 'kB/s', 'MB/s', 'GB/s'];

/** A metric's value for people: `37.2%`, `1.8 GiB`, `3.4 MB/s`. */
export function formatValue(metric: string, value: number | null | undefined): string {
  if (value === null || value === undefined) return '-';
  if (metric.endsWith('_percent')) return `${value.toFixed(1)}%`;
  const scaled = (units: string[], base: number) => {
    let amount = value;
    let unit = 0;
    while (Math.abs(amount) >= base && unit < units.length - 1) {
      amount /= base;
      unit += 1;
    }
    return `${unit === 0 ? Math.round(amount) : amount.toFixed(1)} ${units[unit]}`;
  };
  if (metric.endsWith('_bytes')) return scaled(BINARY_UNITS, 1024);
  if (metric.endsWith('_bps')) return scaled(RATE_UNITS, 1000);
  return String(value);
}

interface Series {
  metric: string;
  unit: string;
  points: [string, number][];
}

interface History {
  instance_id: string;
  start: string;
  end: string;
  step: number;
  aggregate: string;
  resolution: string;
  series: Series[];
}

const SERIES_COLUMNS: Column[] = [
  { header: 'METRIC', value: (s) => s.metric },
  { header: 'UNIT', value: (s) => s.unit, wide: true },
  { header: 'POINTS', value: (s) => s.points },
  { header: 'LATEST', value: (s) => s.latest },
  { header: 'MIN', value: (s) => s.min },
  { header: 'AVG', value: (s) => s.avg },
  { header: 'MAX', value: (s) => s.max },
  { header: 'FIRST AT', value: (s) => s.first_at, wide: true },
  { header: 'LATEST AT', value: (s) => s.latest_at, wide: true },
];

/** One row per series: how many points, the latest value, and min/avg/max over the range. */
function seriesRows(history: History): Record<string, unknown>[] {
  return history.series.map((series) => {
    const values = series.points.map(([, value]) => value);
    const latest = series.points.at(-1);
    const sum = values.reduce((total, value) => total + value, 0);
    return {
      metric: series.metric,
      unit: series.unit,
      points: series.points.length,
      latest: formatValue(series.metric, latest?.[1]),
      min: values.length ? formatValue(series.metric, Math.min(...values)) : '-',
      avg: values.length ? formatValue(series.metric, sum / values.length) : '-',
      max: values.length ? formatValue(series.metric, Math.max(...values)) : '-',
      first_at: series.points[0]?.[0],
      latest_at: latest?.[0],
    };
  });
}

/** Every point: a TIME column and one column per metric (a step some series lack shows "-"). */
function pointRows(history: History): { columns: Column[]; rows: Record<string, unknown>[] } {
  const times = [...new Set(history.series.flatMap((series) => series.points.map(([time]) => time)))].sort();
  const byMetric = history.series.map((series) => ({
    metric: series.metric,
    values: new Map(series.points.map(([time, value]) => [time, value])),
  }));
  const columns: Column[] = [
    { header: 'TIME', value: (row) => row.time },
    ...byMetric.map(({ metric }) => ({
      header: metric.toUpperCase(),
      value: (row: Record<string, unknown>) => row[metric],
    })),
  ];
  const rows = times.map((time) => ({
    time,
    ...Object.fromEntries(
      byMetric.map(({ metric, values }) => [metric, formatValue(metric, values.get(time))]),
    ),
  }));
  return { columns, rows };
}

interface GetFlags {
  metrics?: string[];
  start?: string;
  end?: string;
  step?: number;
  aggregate?: 'avg' | 'min' | 'max';
  points?: boolean;
}

function getCommand(): Command {
  const command = new Command('get')
    .description('metric history of an instance: a row per series (latest, min, avg, max), or every point')
    .argument('<instance>', 'id or name')
    .option(
      '--metrics <names>',
      `comma-separated, from: ${METRIC_NAMES.join(', ')} (default: all it has)`,
      metricList,
    )
    .option(
      '--start <time>',
      'ISO 8601, or a time ago such as 30m, 6h, 7d (default: an hour before --end)',
      (v) => parseTime(v),
    )
    .option('--end <time>', 'ISO 8601, or a time ago (default: now)', (v) => parseTime(v))
    .option('--step <seconds>', 'seconds between points, a multiple of 10', integer)
    .addOption(
      new Option('--aggregate <how>', 'how samples within a step combine (default avg)').choices([
        'avg',
        'min',
        'max',
      ]),
    )
    .option('--points', 'a table of every point (a column per metric) instead of one row per series');
  example(
    command,
    'nimbus metrics get web-1',
    'nimbus metrics get web-1 --metrics cpu_percent,net_rx_bps --start 6h --step 300 --aggregate max --points',
    'nimbus metrics get ins_0123 --start 2026-03-01T00:00:00Z --end 2026-03-02T00:00:00Z -o json',
  );
  return command.action(
    withSession<GetFlags>(async (session, [reference], flags) => {
      const id = await resolveId(session, reference!, INSTANCE);
      const query = defined({
        metrics: flags.metrics?.join(','),
        start: flags.start,
        end: flags.end,
        step: flags.step,
        aggregate: flags.aggregate,
      });
      const { data } = await session.nimbus.get('/v1/instances/{id}/metrics', {
        params: { path: { id }, query },
      });
      const history = data as unknown as History;
      if (!session.humanOutput) {
        printOne(data as unknown as Record<string, unknown>, session.out);
        return;
      }
      note(
        `${history.instance_id}: ${history.start} to ${history.end}, every ${history.step} s (${history.aggregate}, ${history.resolution} samples)`,
      );
      if (flags.points) {
        const { columns, rows } = pointRows(history);
        printList(rows, columns, session.out);
      } else {
        printList(seriesRows(history), SERIES_COLUMNS, session.out);
      }
    }),
  );
}

/**
 * What `ws` needs to trust the server as the CLI's HTTP client does: a pinned certificate (the login
 * profile's, or NIMBUS_TLS_FINGERPRINT) checked before the stream's first message (which carries the key),
 * else NIMBUS_CA_FILE besides the system's CAs. `mismatch` holds the refusal for the error message.
 */
function socketOptions(fingerprint: string | undefined): {
  options: ClientOptions;
  mismatch: () => Error | null;
} {
  let refused: Error | null = null;
  if (fingerprint) {
    const expected = normalizeFingerprint(fingerprint);
    const createConnection = (options: tls.ConnectionOptions) => {
      const socket = tls.connect({ ...options, rejectUnauthorized: false });
      socket.once('secureConnect', () => {
        const actual = socket.getPeerCertificate().fingerprint256 ?? '';
        if (actual.toUpperCase() !== expected) {
          refused = new CertificateMismatchError(expected, actual);
          socket.destroy(refused);
        }
      });
      return socket as Socket;
    };
    return {
      options: { createConnection: createConnection as unknown as ClientOptions['createConnection'] },
      mismatch: () => refused,
    };
  }
  const caFile = process.env.NIMBUS_CA_FILE;
  const options: ClientOptions = caFile
    ? { ca: [...tls.rootCertificates, readFileSync(caFile, 'utf8')] }
    : {};
  return { options, mismatch: () => null };
}

const SPARK = '▁▂▃▄▅▆▇█';
const HISTORY = 30;

/** The last values as a sparkline, scaled to their own range (percentages to 0-100). */
function sparkline(metric: string, values: number[]): string {
  if (values.length === 0) return '';
  const percent = metric.endsWith('_percent');
  const low = percent ? 0 : Math.min(...values);
  const high = percent ? 100 : Math.max(...values);
  return values
    .map((value) => {
      const share = high === low ? 0 : (value - low) / (high - low);
      return SPARK[Math.max(0, Math.min(SPARK.length - 1, Math.round(share * (SPARK.length - 1))))];
    })
    .join('');
}

/** Draws the latest values in place on a terminal: the cursor goes back up over the previous frame. */
class LiveView {
  private lines = 0;
  private readonly recent = new Map<string, number[]>();
  private latest: MetricsMessage | null = null;

  constructor(
    private readonly id: string,
    private status: string,
    private readonly interval: number,
    private readonly color: boolean,
  ) {
    process.stdout.write('\u001b[?25l'); // hide the cursor while drawing
  }

  metrics(message: MetricsMessage): void {
    this.latest = message;
    for (const metric of METRIC_NAMES) {
      const value = message[metric];
      if (typeof value !== 'number') continue;
      const values = [...(this.recent.get(metric) ?? []), value].slice(-HISTORY);
      this.recent.set(metric, values);
    }
    this.draw();
  }

  statusChanged(message: StatusMessage): void {
    this.status = message.status;
    this.draw();
  }

  private draw(): void {
    const width = process.stdout.columns || 80;
    const time = this.latest?.timestamp ?? 'waiting for the first values';
    const frame = [
      `${this.id}  ${this.status}  every ${this.interval} s  ${time}  (Ctrl-C to stop)`,
      '',
      ...[...this.recent.entries()].map(
        ([metric, values]) =>
          `${metric.padEnd(20)}${formatValue(metric, values.at(-1)).padStart(12)}  ${sparkline(metric, values)}`,
      ),
    ];
    if (this.latest?.dropped) {
      frame.push('', `(${this.latest.dropped} samples dropped: the terminal read too slowly)`);
    }
    // Lines cut to the terminal's width (a wrapped line would throw the count below off), then the id in bold.
    const lines = frame.map((line) => (line.length > width ? line.slice(0, width) : line));
    if (this.color && lines[0]!.startsWith(this.id)) {
      lines[0] = `\u001b[1m${this.id}\u001b[22m${lines[0]!.slice(this.id.length)}`;
    }
    // Up to the first line of the previous frame, clear everything below, draw the new one.
    const up = this.lines > 0 ? `\u001b[${this.lines}F` : '';
    process.stdout.write(`${up}\u001b[J${lines.join('\n')}\n`);
    this.lines = lines.length;
  }

  end(): void {
    process.stdout.write('\u001b[?25h');
  }
}

/** One line per message for a pipe or a file: `time instance metric=value …`, raw values. */
function plainLine(message: MetricsMessage | StatusMessage): string {
  if (message.type === 'status') {
    return `${message.timestamp} ${message.instance_id} status=${message.status} event=${message.event}`;
  }
  const values = METRIC_NAMES.filter((metric) => typeof message[metric] === 'number').map(
    (metric) => `${metric}=${message[metric]}`,
  );
  const dropped = message.dropped ? [`dropped=${message.dropped}`] : [];
  return [message.timestamp, message.instance_id, ...values, ...dropped].join(' ');
}

interface WatchFlags {
  metrics?: string[];
  interval?: number;
  count?: number;
}

function watchCommand(): Command {
  const command = new Command('watch')
    .description('live values of an instance from the metric stream, redrawn in place until Ctrl-C')
    .argument('<instance>', 'id or name')
    .option(
      '--metrics <names>',
      `comma-separated, from: ${METRIC_NAMES.join(', ')} (default: all it has)`,
      metricList,
    )
    .option('--interval <seconds>', 'seconds between updates, 1-60 (default: the server’s, 5)', integer)
    .option('--count <n>', 'stop after this many updates', integer);
  example(
    command,
    'nimbus metrics watch web-1',
    'nimbus metrics watch web-1 --metrics cpu_percent,memory_used_bytes --interval 1',
    'nimbus metrics watch ins_0123 --count 1 -o json',
  );
  return command.action(
    withSession<WatchFlags>(async (session, [reference], flags) => {
      if (flags.count !== undefined && flags.count < 1) throw new UsageError('--count must be at least 1');
      const id = await resolveId(session, reference!, INSTANCE);
      await watch(session, id, flags);
    }),
  );
}

async function watch(session: Session, id: string, flags: WatchFlags): Promise<void> {
  const connection = session.connection;
  // The REST client made for resolveId has checked that there is a key; the stream sends it first thing.
  const apiKey = connection.apiKey!;
  const trust = socketOptions(connection.fingerprint);
  let socketError: Error | null = null;
  // The SDK's stream reports a close code; the socket's own error (a certificate, a refused connection) is
  // kept here so that a stream that never opened says why.
  class RecordingSocket extends WebSocket {
    constructor(url: string, options?: ClientOptions) {
      super(url, options);
      this.on('error', (error) => {
        socketError ??= error;
      });
    }
  }
  const stream = openMetricsStream({
    baseUrl: connection.url,
    apiKey,
    instanceId: id,
    ...(flags.interval !== undefined ? { interval: flags.interval } : {}),
    ...(flags.metrics !== undefined ? { metrics: flags.metrics as StreamMetricName[] } : {}),
    WebSocket: RecordingSocket as unknown as WebSocketConstructor,
    socketOptions: trust.options as Record<string, unknown>,
  });
  const out = session.out;
  const live = out.width !== null && session.humanOutput;
  let view: LiveView | null = null;
  let updates = 0;
  const write = (message: MetricsMessage | StatusMessage) => {
    if (out.format === 'json') out.write(`${JSON.stringify(message)}\n`);
    else if (out.format === 'yaml') out.write(`---\n${YAML.stringify(message)}`);
    else if (!live) out.write(`${plainLine(message)}\n`);
  };
  stream.onMetrics((message) => {
    if (flags.count !== undefined && updates >= flags.count) return;
    updates += 1;
    write(message);
    view?.metrics(message);
    if (flags.count !== undefined && updates >= flags.count) stream.close();
  });
  stream.onStatus((message) => {
    write(message);
    view?.statusChanged(message);
  });
  let stopping = false;
  const stop = () => {
    stopping = true;
    stream.close();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    let ready: Awaited<typeof stream.ready>;
    try {
      ready = await stream.ready;
    } catch (error) {
      if (stopping) return; // Ctrl-C before the stream opened
      const cause = trust.mismatch() ?? socketError;
      if (error instanceof MetricsStreamClosedError && error.code < 4000 && cause) {
        throw new Error(`cannot open the metric stream of ${connection.url}`, { cause });
      }
      throw error;
    }
    if (live) view = new LiveView(id, ready.statuses[id] ?? '?', ready.interval, out.color);
    else if (session.humanOutput) note(`Streaming ${id} every ${ready.interval} s (Ctrl-C to stop)`);
    const closed = await stream.closed;
    // 1000: we closed it (Ctrl-C, --count) or the instance was deleted; 4xxx: refused on the way.
    if (closed.code >= 4000) throw new MetricsStreamClosedError(closed.code, closed.reason, null);
    if (closed.code !== 1000 && closed.code !== 1005) {
      throw new Error(
        `The metric stream ended (close code ${closed.code}${closed.reason ? `: ${closed.reason}` : ''})`,
        {
          ...(socketError ? { cause: socketError } : {}),
        },
      );
    }
  } finally {
    process.removeListener('SIGINT', stop);
    process.removeListener('SIGTERM', stop);
    view?.end();
  }
}

export function metricsCommand(): Command {
  const group = new Command('metrics').description("instances' metric history and live values");
  example(group, 'nimbus metrics get web-1 --start 6h --step 300', 'nimbus metrics watch web-1');
  return addCommands(group, getCommand(), watchCommand());
}
