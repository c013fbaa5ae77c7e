/**
 * The console charts' axis labels (console/src/components/chart-axes.ts): the time axis steps in whole
 * seconds or more and never shows fractions of a second; value labels gain decimals until neighbouring
 * ticks read differently (a flat CPU line once showed "13%" three times).
 */
import { describe, expect, it } from 'vitest';

// The console is compiled on its own (console/tsconfig.json, DOM libs); vitest loads its TypeScript as is.
const AXES_MODULE = '../console/src/components/chart-axes.ts';
const { TIME_STEPS, timeLabels, valueLabels } = (await import(AXES_MODULE)) as {
  TIME_STEPS: number[];
  timeLabels: (ticks: number[], step: number) => string[];
  valueLabels: (ticks: number[], format: (value: number, digits?: number) => string) => string[];
};

const percent = (value: number, digits = 0) => `${value.toFixed(digits)}%`;
const START = Date.UTC(2026, 10, 26, 14, 5, 0) / 1000;

describe('console chart axes', () => {
  it('steps time in whole seconds at least', () => {
    expect(Math.min(...TIME_STEPS)).toBe(1);
    expect(TIME_STEPS.every(Number.isInteger)).toBe(true);
  });

  it('labels a short range with whole seconds, longer ones with minutes, days by date', () => {
    const seconds = timeLabels([START, START + 5, START + 10], 5);
    for (const label of seconds) expect(label).toMatch(/^\d\d:\d\d:\d\d$/);
    expect(new Set(seconds).size).toBe(3);
    const minutes = timeLabels([START, START + 600], 600);
    for (const label of minutes) expect(label).toMatch(/^\d\d:\d\d$/);
    const days = timeLabels([START, START + 86_400], 86_400);
    for (const label of days) expect(label).not.toMatch(/:/);
    expect(days[0]).not.toBe(days[1]);
  });

  it('keeps the formatter precision when it tells the ticks apart', () => {
    expect(valueLabels([0, 25, 50, 75], percent)).toEqual(['0%', '25%', '50%', '75%']);
  });

  it('adds decimals until neighbouring value ticks differ', () => {
    expect(valueLabels([12.8, 13, 13.2], percent)).toEqual(['12.8%', '13.0%', '13.2%']);
    expect(valueLabels([13, 13.05, 13.1], percent)).toEqual(['13.00%', '13.05%', '13.10%']);
  });
});
