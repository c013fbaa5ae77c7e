/**
 * The body of `GET /v1/instances/{id}/metrics`, written straight into bytes: the envelope around the
 * answer, each series' points as the `[timestamp, value]` pairs its schema describes, byte for byte what
 * JSON.stringify writes for them.
 *
 * Why. A day of 10 s points is 60,480 pairs over the seven series (about 2.3 MB of JSON). Made as a pair,
 * a timestamp string and a value per point, then serialised, the answer took several times the CPU of
 * everything else the query does, most of it allocating and collecting those objects. Here a point
 * costs a few byte stores: the timestamp's date part is copied once per day and the time of day is
 * written as digits, whole numbers are written as digits, other numbers through String() (what
 * JSON.stringify writes for a finite number). Everything that is not a point (ids, names, the metadata)
 * goes through JSON.stringify.
 */
import { GrowingBuffer } from './growing-buffer.js';
import type { MetricSeries, MetricsAnswer } from './service.js';

const DAY_MS = 86_400_000;
/** 9999-12-31T23:59:59.999Z: later times (and negative ones) have a six-digit year with a sign. */
const LAST_FOUR_DIGIT_YEAR_MS = 253_402_300_799_999;
/** Bytes a point takes at most, but for an unusual value written through String(). */
const POINT_BYTES = 64;

const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const ZERO = 0x30;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const DOT = 0x2e;
/**
 * Below 1e15 hundredths a value has at most 15 significant digits, where the nearest double and the
 * decimal name each other one to one (a double holds 15 decimal digits exactly).
 */
const MAX_HUNDREDTHS = 1e15;
/** `.000Z"`, the end of a whole-second timestamp. */
const WHOLE_SECOND_END = [DOT, ZERO, ZERO, ZERO, 0x5a, QUOTE];

const BILLION = 1_000_000_000;

/** `value` (0–99) as two digits at `at`; returns the position after them. */
function twoDigits(out: Buffer, at: number, value: number): number {
  const tens = (value / 10) | 0;
  out[at] = ZERO + tens;
  out[at + 1] = ZERO + value - tens * 10;
  return at + 2;
}

class ByteWriter extends GrowingBuffer {
  /** The start of the day of the last timestamp written, and its date part (`2026-03-02T`) as bytes. */
  private dayStartMs = Number.NaN;
  private readonly datePrefix = new Uint8Array(11);

  /** Text written as it is (UTF-8). */
  text(value: string): void {
    this.room(Buffer.byteLength(value));
    this.length += this.buffer.write(value, this.length, 'utf8');
  }

  json(value: unknown): void {
    this.text(JSON.stringify(value) ?? 'null');
  }

  /** One `[timestamp, value]` pair. */
  point(ms: number, value: number): void {
    this.room(POINT_BYTES);
    this.buffer[this.length++] = OPEN;
    this.timestamp(ms);
    this.buffer[this.length++] = COMMA;
    this.number(value);
    this.buffer[this.length++] = CLOSE;
  }

  /** A number as JSON.stringify writes it. */
  private number(value: number): void {
    if (Number.isSafeInteger(value)) {
      this.integer(value);
      return;
    }
    // Percentages are shown to 0.01 (resources/metrics/service.ts): when the value is the double nearest to
    // hundredths/100, its shortest round-trip form, which String() writes, is that decimal with
    // trailing zeros dropped, so it is written from the integer without making a string.
    const hundredths = Math.round(value * 100);
    if (hundredths / 100 === value && Math.abs(hundredths) < MAX_HUNDREDTHS) {
      this.hundredths(hundredths);
      return;
    }
    this.ascii(Number.isFinite(value) ? String(value) : 'null');
  }

  /** hundredths/100 as a decimal: `12.3` for 1230, `-0.05` for -5 (never a whole number here). */
  private hundredths(hundredths: number): void {
    if (hundredths < 0) {
      this.byte(0x2d);
      hundredths = -hundredths;
    }
    this.integer(Math.floor(hundredths / 100));
    const cents = hundredths % 100;
    this.room(3);
    const out = this.buffer;
    out[this.length++] = DOT;
    out[this.length++] = ZERO + Math.floor(cents / 10);
    if (cents % 10 !== 0) out[this.length++] = ZERO + (cents % 10);
  }

  /**
   * A safe integer's digits. Byte counts pass 2^31, where arithmetic leaves V8's small integers for
   * doubles, so a large value is cut into parts below 10^9 and each part's digits come from int32 math.
   */
  private integer(value: number): void {
    this.room(17);
    if (value < 0) {
      this.buffer[this.length++] = 0x2d;
      value = -value;
    }
    if (value < BILLION) {
      this.smallInteger(value | 0, 0);
      return;
    }
    const high = Math.floor(value / BILLION);
    const low = (value - high * BILLION) | 0;
    if (high < BILLION) {
      this.smallInteger(high | 0, 0);
    } else {
      const top = Math.floor(high / BILLION);
      this.smallInteger(top | 0, 0);
      this.smallInteger((high - top * BILLION) | 0, 9);
    }
    this.smallInteger(low, 9);
  }

  /** An integer in [0, 10^9) as digits, left-padded with zeros to `width` digits. */
  private smallInteger(value: number, width: number): void {
    let digits = 1;
    for (let scale = 10; scale <= value && digits < 9; scale *= 10) digits++;
    if (digits < width) digits = width;
    const out = this.buffer;
    let at = this.length + digits;
    this.length = at;
    for (let i = 0; i < digits; i++) {
      const next = (value / 10) | 0;
      out[--at] = ZERO + value - next * 10;
      value = next;
    }
  }

  /** Text known to be ASCII (a number's), byte by byte: shorter than a call into Buffer.write. */
  private ascii(value: string): void {
    this.room(value.length);
    for (let i = 0; i < value.length; i++) this.buffer[this.length++] = value.charCodeAt(i);
  }

  /** A quoted ISO 8601 timestamp, as JSON.stringify(new Date(ms).toISOString()) writes it. */
  private timestamp(ms: number): void {
    let sinceMidnight = ms - this.dayStartMs;
    if (!(sinceMidnight >= 0 && sinceMidnight < DAY_MS)) {
      if (ms < 0 || ms > LAST_FOUR_DIGIT_YEAR_MS) {
        this.json(new Date(ms).toISOString());
        return;
      }
      this.startDay(ms);
      sinceMidnight = ms - this.dayStartMs;
    }
    // Below a day, so int32 math from here; a time with milliseconds is rare enough for toISOString.
    const seconds = sinceMidnight / 1000;
    const whole = seconds | 0;
    if (whole !== seconds) {
      this.json(new Date(ms).toISOString());
      return;
    }
    this.room(26);
    const out = this.buffer;
    let at = this.length;
    out[at++] = QUOTE;
    for (let i = 0; i < 11; i++) out[at++] = this.datePrefix[i] as number;
    const hours = (whole / 3600) | 0;
    const minutes = ((whole - hours * 3600) / 60) | 0;
    const second = whole - hours * 3600 - minutes * 60;
    at = twoDigits(out, at, hours);
    out[at++] = COLON;
    at = twoDigits(out, at, minutes);
    out[at++] = COLON;
    at = twoDigits(out, at, second);
    for (let i = 0; i < 6; i++) out[at++] = WHOLE_SECOND_END[i] as number;
    this.length = at;
  }

  /** Remembers the day of `ms` and its date part (`2026-03-02T`) as bytes. */
  private startDay(ms: number): void {
    this.dayStartMs = Math.floor(ms / DAY_MS) * DAY_MS;
    const date = new Date(this.dayStartMs).toISOString();
    for (let i = 0; i < 11; i++) this.datePrefix[i] = date.charCodeAt(i);
  }

  result(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}

function writeSeries(out: ByteWriter, series: MetricSeries): void {
  out.text('{');
  let first = true;
  for (const [key, value] of Object.entries(series)) {
    if (key === 'values') continue;
    if (!first) out.byte(COMMA);
    first = false;
    if (key !== 'times') {
      out.json(key);
      out.byte(COLON);
      out.json(value);
      continue;
    }
    out.text('"points":[');
    const { times, values } = series;
    for (let i = 0; i < times.length; i++) {
      if (i > 0) out.byte(COMMA);
      out.point(times[i] as number, values[i] as number);
    }
    out.byte(CLOSE);
  }
  out.text('}');
}

function writeAnswer(out: ByteWriter, answer: MetricsAnswer): void {
  out.text('{');
  let first = true;
  for (const [key, value] of Object.entries(answer)) {
    if (!first) out.byte(COMMA);
    first = false;
    out.json(key);
    out.byte(COLON);
    if (key !== 'series') {
      out.json(value);
      continue;
    }
    out.text('[');
    answer.series.forEach((series, i) => {
      if (i > 0) out.byte(COMMA);
      writeSeries(out, series);
    });
    out.text(']');
  }
  out.text('}');
}

/**
 * The JSON of an envelope (platform/http/envelope.ts ok()) whose `data` is a metrics answer: each series
 * `{metric, unit, points: [[timestamp, value], …]}` in place of its `times` and `values`.
 */
export function metricsHistoryBody(envelope: { data: MetricsAnswer } & Record<string, unknown>): Buffer {
  const points = envelope.data.series.reduce((sum, series) => sum + series.times.length, 0);
  const out = new ByteWriter(points * 40 + 1024);
  out.text('{');
  let first = true;
  for (const [key, value] of Object.entries(envelope)) {
    if (!first) out.byte(COMMA);
    first = false;
    out.json(key);
    out.byte(COLON);
    if (key === 'data') writeAnswer(out, envelope.data);
    else out.json(value);
  }
  out.text('}');
  return out.result();
}
