/**
 * A small time-series chart (uPlot, ~50 KB): `data` is [x seconds, series…]. The plot is created once and
 * given new data with setData, so live points cost no re-render of the page. A visually hidden summary
 * gives screen readers the latest values.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { chartAxes, type ValueFormat } from './chart-axes.ts';

export interface ChartSeries {
  label: string;
  color: string;
}

interface Props {
  title: string;
  series: ChartSeries[];
  data: (number | null)[][];
  format: ValueFormat;
}

export function Chart({ title, series, data, format }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    if (!host.current) return;
    const width = () => Math.max(280, (host.current?.clientWidth ?? 600) - 8);
    plot.current = new uPlot(
      {
        width: width(),
        height: 180,
        series: [
          {},
          ...series.map((s) => ({
            label: s.label,
            stroke: s.color,
            width: 2,
            value: (_u: uPlot, v: number | null) => (v === null ? '—' : format(v)),
          })),
        ],
        axes: chartAxes(format),
        legend: { live: false },
      },
      data as uPlot.AlignedData,
      host.current,
    );
    const resize = () => plot.current?.setSize({ width: width(), height: 180 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.current?.destroy();
      plot.current = null;
    };
    // The plot is built once per series set; data changes go through setData below.
  }, [series.map((s) => s.label).join()]);

  useEffect(() => {
    plot.current?.setData(data as uPlot.AlignedData);
  }, [data]);

  const points = data[0]?.length ?? 0;
  const latest = series
    .map((s, i) => {
      const value = data[i + 1]?.[points - 1];
      return `${s.label} ${value === undefined || value === null ? 'no data' : format(value)}`;
    })
    .join(', ');
  return (
    <figure class="chart" data-points={points}>
      <figcaption>{title}</figcaption>
      <div ref={host} />
      <p class="visually-hidden">
        {points} points; latest: {latest}
      </p>
    </figure>
  );
}
