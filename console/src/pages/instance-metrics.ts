/**
 * The detail page's chart data: history for a range from GET /v1/instances/{id}/metrics, extended by
 * the stream's live samples. Each chart's data is uPlot's aligned form, [x seconds, series…].
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { unwrap } from '../api.ts';
import type { ChartSeries } from '../components/chart.tsx';
import type { ValueFormat } from '../components/chart-axes.ts';
import { formatBytes } from '../format.ts';
import type { MetricsMessage } from '../live.ts';
import { currentSession } from '../session.ts';

export const HISTORY_RANGES = ['1h', '24h', '7d', '30d'] as const;
export type HistoryRange = (typeof HISTORY_RANGES)[number];
const RANGE_SECONDS: Record<HistoryRange, number> = {
  '1h': 3600,
  '24h': 86_400,
  '7d': 604_800,
  '30d': 2_592_000,
};
/** About 300 points per chart whatever the range (a multiple of 10 s, as the API wants). */
const STEP_SECONDS: Record<HistoryRange, number> = { '1h': 10, '24h': 300, '7d': 3600, '30d': 7200 };
/** Live points kept beyond the history, so a page left open does not grow forever. */
const MAX_POINTS = 2000;

type Metric =
  | 'cpu_percent'
  | 'memory_used_bytes'
  | 'disk_read_bps'
  | 'disk_write_bps'
  | 'net_rx_bps'
  | 'net_tx_bps';

interface ChartSpec {
  title: string;
  metrics: Metric[];
  series: ChartSeries[];
  format: ValueFormat;
}

const perSecond: ValueFormat = (value, digits) => `${formatBytes(value, digits)}/s`;

export const CHARTS: ChartSpec[] = [
  {
    title: 'CPU',
    metrics: ['cpu_percent'],
    series: [{ label: 'CPU %', color: '#2f6fde' }],
    format: (v, digits = 0) => `${v.toFixed(digits)}%`,
  },
  {
    title: 'Memory',
    metrics: ['memory_used_bytes'],
    series: [{ label: 'Used', color: '#8a4bd6' }],
    format: formatBytes,
  },
  {
    title: 'Disk',
    metrics: ['disk_read_bps', 'disk_write_bps'],
    series: [
      { label: 'Read', color: '#1a9d6f' },
      { label: 'Write', color: '#d9822b' },
    ],
    format: perSecond,
  },
  {
    title: 'Network',
    metrics: ['net_rx_bps', 'net_tx_bps'],
    series: [
      { label: 'Received', color: '#2f9bd6' },
      { label: 'Sent', color: '#d64b6f' },
    ],
    format: perSecond,
  },
];

const ALL_METRICS = CHARTS.flatMap((chart) => chart.metrics);
type Samples = Map<number, Partial<Record<Metric, number>>>;

function toCharts(samples: Samples): Record<string, (number | null)[][]> {
  const times = [...samples.keys()].sort((a, b) => a - b).slice(-MAX_POINTS);
  const charts: Record<string, (number | null)[][]> = {};
  for (const chart of CHARTS) {
    charts[chart.title] = [
      times,
      ...chart.metrics.map((metric) => times.map((t) => samples.get(t)?.[metric] ?? null)),
    ];
  }
  return charts;
}

export function useMetricSeries(instanceId: string, range: HistoryRange) {
  const samples = useRef<Samples>(new Map());
  const [data, setData] = useState<Record<string, (number | null)[][]>>({});
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    samples.current = new Map();
    setData({});
    let current = true;
    const end = new Date();
    const start = new Date(end.getTime() - RANGE_SECONDS[range] * 1000);
    unwrap(
      currentSession().api.GET('/v1/instances/{id}/metrics', {
        params: {
          path: { id: instanceId },
          query: {
            start: start.toISOString(),
            end: end.toISOString(),
            step: STEP_SECONDS[range],
            metrics: ALL_METRICS.join(','),
            aggregate: 'avg',
          },
        },
      }),
    ).then(
      (answer) => {
        if (!current) return;
        for (const series of answer.data.series) {
          for (const [time, value] of series.points) {
            const t = Date.parse(String(time)) / 1000;
            const sample = samples.current.get(t) ?? {};
            sample[series.metric as Metric] = Number(value);
            samples.current.set(t, sample);
          }
        }
        setError(null);
        setData(toCharts(samples.current));
      },
      (failure: unknown) => current && setError(failure),
    );
    return () => {
      current = false;
    };
  }, [instanceId, range]);

  const addLive = (message: MetricsMessage) => {
    const sample: Partial<Record<Metric, number>> = {};
    for (const metric of ALL_METRICS) {
      const value = message[metric];
      if (typeof value === 'number') sample[metric] = value;
    }
    samples.current.set(Date.parse(message.timestamp) / 1000, sample);
    setData(toCharts(samples.current));
  };

  return { data, error, addLive };
}
