import { describe, expect, it } from 'vitest';
import { formatBytes, formatDate, formatMoney, formatPrice } from './format.ts';

describe('format', () => {
  it('writes a missing date as a dash, a date in the browser locale', () => {
    expect(formatDate(null)).toBe('—');
    expect(formatDate(undefined)).toBe('—');
    expect(formatDate('')).toBe('—');
    const iso = '2026-04-06T12:34:00Z';
    expect(formatDate(iso)).toBe(
      new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }),
    );
    expect(formatDate(iso)).toMatch(/2026/);
  });

  it('prices below a dollar an hour show four decimals, others two', () => {
    expect(formatPrice(0.0075)).toBe('$0.0075/h');
    expect(formatPrice(0.5)).toBe('$0.5000/h');
    expect(formatPrice(1)).toBe('$1.00/h');
    expect(formatPrice(12.345)).toBe('$12.35/h');
    expect(formatMoney(3)).toBe('$3.00');
    expect(formatMoney(1234.5)).toBe('$1234.50');
  });

  it('sizes step by 1024, one decimal below 10 of a unit, none above or for bytes', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1024)).toBe('1.0 KB');
    expect(formatBytes(1536)).toBe('1.5 KB');
    expect(formatBytes(10 * 1024)).toBe('10 KB');
    expect(formatBytes(5 * 1024 ** 3)).toBe('5.0 GB');
    expect(formatBytes(2048 * 1024 ** 4)).toBe('2048 TB');
    expect(formatBytes(1536, 2)).toBe('1.50 KB');
    expect(formatBytes(100, 1)).toBe('100.0 B');
  });
});
