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
import type { MetricSeries, MetricsAnswer } from '../services/metrics.js';

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
/** `.000Z"`, the end of a whole-second timestamp. */
const WHOLE_SECOND_END = [0x2e, ZERO, ZERO, ZERO, 0x5a, QUOTE];

class ByteWriter {
  private buffer: Buffer;
  length = 0;
  /** The day of the last whole-second timestamp written, and its date part (`2026-03-02T`) as bytes. */
  private day = Number.NaN;
  private readonly datePrefix = new Uint8Array(11);

  constructor(capacity: number) {
    this.buffer = Buffer.allocUnsafe(capacity);
  }

  room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(bigger, 0, 0, this.length);
    this.buffer = bigger;
  }

  byte(value: number): void {
    this.room(1);
    this.buffer[this.length++] = value;
  }

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
    if (!Number.isSafeInteger(value)) {
      this.ascii(Number.isFinite(value) ? String(value) : 'null');
      return;
    }
    this.room(17);
    const out = this.buffer;
    let rest = value;
    if (rest < 0) {
      out[this.length++] = 0x2d;
      rest = -rest;
    }
    let digits = 1;
    for (let scale = 10; scale <= rest; scale *= 10) digits++;
    let at = this.length + digits;
    this.length = at;
    do {
      out[--at] = ZERO + (rest % 10);
      rest = Math.floor(rest / 10);
    } while (rest > 0);
  }

  /** Text known to be ASCII (a number's), byte by byte: shorter than a call into Buffer.write. */
  private ascii(value: string): void {
    this.room(value.length);
    for (let i = 0; i < value.length; i++) this.buffer[this.length++] = value.charCodeAt(i);
  }

  /** A quoted ISO 8601 timestamp, as JSON.stringify(new Date(ms).toISOString()) writes it. */
  private timestamp(ms: number): void {
    if (ms % 1000 !== 0 || ms < 0 || ms > LAST_FOUR_DIGIT_YEAR_MS) {
      this.json(new Date(ms).toISOString());
      return;
    }
    const day = Math.floor(ms / DAY_MS);
    if (day !== this.day) {
      this.day = day;
      const date = new Date(day * DAY_MS).toISOString();
      for (let i = 0; i < 11; i++) this.datePrefix[i] = date.charCodeAt(i);
    }
    this.room(26);
    const out = this.buffer;
    let at = this.length;
    out[at++] = QUOTE;
    for (let i = 0; i < 11; i++) out[at++] = this.datePrefix[i] as number;
    const seconds = (ms - day * DAY_MS) / 1000;
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    const second = seconds % 60;
    out[at++] = ZERO + Math.floor(hours / 10);
    out[at++] = ZERO + (hours % 10);
    out[at++] = COLON;
    out[at++] = ZERO + Math.floor(minutes / 10);
    out[at++] = ZERO + (minutes % 10);
    out[at++] = COLON;
    out[at++] = ZERO + Math.floor(second / 10);
    out[at++] = ZERO + (second % 10);
    for (let i = 0; i < 6; i++) out[at++] = WHOLE_SECOND_END[i] as number;
    this.length = at;
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
 * The JSON of an envelope (http/envelope.ts ok()) whose `data` is a metrics answer: each series
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
