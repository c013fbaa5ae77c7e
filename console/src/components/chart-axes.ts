/**
 * Axis labels for the charts. uPlot's defaults suit any time range, so for a minute of live points they
 * step in fractions of a second (":12.600"); and a flat series gets y ticks closer together than its
 * formatter's precision shows ("13%" three times). Here the time axis steps in whole seconds, minutes,
 * hours or days and is labelled to match, and the y labels gain decimals until neighbouring ticks differ.
 */
import type uPlot from 'uplot';

const MINUTE = 60;
const HOUR = 3600;
const DAY = 86_400;

/** The time steps the x axis may use, in seconds: never less than one. */
export const TIME_STEPS = [
  1,
  2,
  5,
  10,
  15,
  30,
  MINUTE,
  2 * MINUTE,
  5 * MINUTE,
  10 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  3 * HOUR,
  6 * HOUR,
  12 * HOUR,
  DAY,
  2 * DAY,
  7 * DAY,
];

const clock = (seconds: boolean) =>
  new Intl.DateTimeFormat(undefined, {
    hour: '2-digit',
    minute: '2-digit',
    ...(seconds ? { second: '2-digit' } : {}),
    hourCycle: 'h23',
  });
const WITH_SECONDS = clock(true);
const WITHOUT_SECONDS = clock(false);
const DAY_OF_MONTH = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

/** Labels for time ticks (Unix seconds) `step` seconds apart: 14:05:30, 14:05 or Nov 26. */
export function timeLabels(ticks: number[], step: number): string[] {
  const format = step < MINUTE ? WITH_SECONDS : step < DAY ? WITHOUT_SECONDS : DAY_OF_MONTH;
  return ticks.map((tick) => format.format(new Date(tick * 1000)));
}

/** A value formatter; `digits` asks for that many decimals instead of the formatter's usual precision. */
export type ValueFormat = (value: number, digits?: number) => string;

/** Labels for value ticks: the formatter's own precision, or more decimals (up to 3) until no two neighbours read the same. */
export function valueLabels(ticks: number[], format: ValueFormat): string[] {
  let labels = ticks.map((tick) => format(tick));
  for (let digits = 1; digits <= 3 && hasRepeats(labels); digits++) {
    labels = ticks.map((tick) => format(tick, digits));
  }
  return labels;
}

function hasRepeats(labels: string[]): boolean {
  return labels.some((label, i) => i > 0 && label === labels[i - 1]);
}

/** uPlot axes: whole-second time steps with matching labels, and value labels as above. */
export function chartAxes(format: ValueFormat): uPlot.Axis[] {
  return [
    {
      incrs: TIME_STEPS,
      values: (_u, ticks, _axis, _space, step) => timeLabels(ticks, step),
    },
    { values: (_u, ticks) => valueLabels(ticks, format), size: 70 },
  ];
}
