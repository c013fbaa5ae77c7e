/**
 * Compact storage of metric samples: one block holds one instance's samples over a fixed window (an
 * hour of 10-second samples, a day of 5-minute rollups), every series of it together.
 *
 * Format. A block is a grid of `slots` time slots (slot i is `start + i × step`, which the store keeps
 * beside the block). Slots with a sample are marked in one presence bitmap shared by all columns, so a
 * gap costs one bit and reads back as a missing point, never a zero. Each column (a series: a metric, or
 * a metric's avg/min/max) holds one integer per present slot — the value in quanta of its metric
 * (resources/metrics/catalog.ts) — written as the zigzag varint of its difference from the previous one.
 * Metrics move little from one sample to the next, so most differences take one or two bytes where a
 * float64 takes eight.
 *
 *   byte 0            format: 1 plain, 2 the rest deflated (raw DEFLATE)
 *   varint            slots
 *   ceil(slots/8) B   presence bitmap, slot i in bit (i % 8) of byte ⌊i / 8⌋
 *   varint            column count
 *   per column        varint id, then one zigzag varint delta per present slot
 *
 * Open blocks (the hour being collected) are written plain: they are rewritten on every collection
 * and deflating each time would cost more than it saves. A block is deflated once, when sealed. The
 * collector keeps its open blocks as BlockAppenders, which keep each column's bytes as they grow, so a
 * collection appends one delta per column instead of encoding the hour so far again.
 *
 * Integers are handled arithmetically (not with 32-bit bit operations), so any integer of magnitude up
 * to 2^51 round-trips exactly.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { GrowingBuffer } from './growing-buffer.js';

export interface BlockColumn {
  id: number;
  /** One integer per present slot, in slot order. */
  values: number[];
}

export interface Block {
  slots: number;
  /** Indexes of the slots holding a sample, ascending, each in [0, slots). */
  present: number[];
  columns: BlockColumn[];
}

export const MAX_BLOCK_INTEGER = 2 ** 51;

const PLAIN = 1;
const DEFLATED = 2;

class Writer extends GrowingBuffer {
  constructor() {
    super(256);
  }

  /** Unsigned LEB128 of a non-negative safe integer. */
  varint(value: number): void {
    this.room(8);
    let rest = value;
    while (rest >= 0x80) {
      this.buffer[this.length++] = (rest % 0x80) | 0x80;
      rest = Math.floor(rest / 0x80);
    }
    this.buffer[this.length++] = rest;
  }

  signed(value: number): void {
    this.varint(value >= 0 ? value * 2 : -value * 2 - 1);
  }

  bytes(source: Uint8Array): void {
    this.room(source.length);
    this.buffer.set(source, this.length);
    this.length += source.length;
  }

  result(): Buffer {
    return Buffer.from(this.buffer.subarray(0, this.length));
  }

  /** Copies what was written into `target` at `offset`; returns the offset after it. */
  copyTo(target: Buffer, offset: number): number {
    this.buffer.copy(target, offset, 0, this.length);
    return offset + this.length;
  }
}

/** Bytes of the unsigned LEB128 of a non-negative safe integer. */
function varintLength(value: number): number {
  let bytes = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes++;
  return bytes;
}

function writeVarint(target: Buffer, offset: number, value: number): number {
  let at = offset;
  let rest = value;
  while (rest >= 0x80) {
    target[at++] = (rest % 0x80) | 0x80;
    rest = Math.floor(rest / 0x80);
  }
  target[at++] = rest;
  return at;
}

class Reader {
  offset = 0;
  constructor(private readonly buffer: Uint8Array) {}

  byte(): number {
    if (this.offset >= this.buffer.length) throw new RangeError('metric block: truncated');
    return this.buffer[this.offset++] as number;
  }

  varint(): number {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = this.byte();
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 0x80;
      if (scale > 2 ** 56) throw new RangeError('metric block: varint too long');
    }
  }

  signed(): number {
    const zigzag = this.varint();
    return zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2;
  }

  bytes(count: number): Uint8Array {
    if (this.offset + count > this.buffer.length) throw new RangeError('metric block: truncated');
    const slice = this.buffer.subarray(this.offset, this.offset + count);
    this.offset += count;
    return slice;
  }
}

function body(block: Block): Buffer {
  const writer = new Writer();
  writer.varint(block.slots);
  const bitmap = new Uint8Array(Math.ceil(block.slots / 8));
  for (const slot of block.present) bitmap[slot >> 3] = (bitmap[slot >> 3] as number) | (1 << (slot & 7));
  writer.bytes(bitmap);
  writer.varint(block.columns.length);
  for (const column of block.columns) {
    if (column.values.length !== block.present.length) {
      throw new RangeError(
        `metric block: column ${column.id} has ${column.values.length} values for ${block.present.length} slots`,
      );
    }
    writer.varint(column.id);
    let previous = 0;
    for (const value of column.values) {
      writer.signed(value - previous);
      previous = value;
    }
  }
  return writer.result();
}

/** The block's bytes; `seal` deflates them (for blocks that will not change again). */
export function encodeBlock(block: Block, options: { seal?: boolean } = {}): Buffer {
  const plain = body(block);
  if (!options.seal) return Buffer.concat([Buffer.of(PLAIN), plain]);
  return Buffer.concat([Buffer.of(DEFLATED), deflateRawSync(plain)]);
}

export function decodeBlock(bytes: Uint8Array): Block {
  const format = bytes[0];
  const rest = bytes.subarray(1);
  if (format !== PLAIN && format !== DEFLATED) throw new RangeError(`metric block: unknown format ${format}`);
  const reader = new Reader(format === DEFLATED ? inflateRawSync(rest) : rest);
  const slots = reader.varint();
  const bitmap = reader.bytes(Math.ceil(slots / 8));
  const present: number[] = [];
  for (let slot = 0; slot < slots; slot++) {
    if (((bitmap[slot >> 3] as number) >> (slot & 7)) & 1) present.push(slot);
  }
  const columnCount = reader.varint();
  const columns: BlockColumn[] = [];
  for (let c = 0; c < columnCount; c++) {
    const id = reader.varint();
    const values = new Array<number>(present.length);
    let previous = 0;
    for (let i = 0; i < present.length; i++) {
      previous += reader.signed();
      values[i] = previous;
    }
    columns.push({ id, values });
  }
  return { slots, present, columns };
}

/** An empty block of `slots` slots with these columns. */
export function emptyBlock(slots: number, columnIds: readonly number[]): Block {
  return { slots, present: [], columns: columnIds.map((id) => ({ id, values: [] })) };
}

/**
 * Puts one row of values (by column id) into `slot`: appended when it is after every present slot (the
 * collector's case), replacing the row when the slot is present, inserted in order otherwise. A column
 * the row lacks, or a new column, is refused: every present slot must have a value in every column.
 */
export function putRow(block: Block, slot: number, row: ReadonlyMap<number, number>): void {
  if (!Number.isInteger(slot) || slot < 0 || slot >= block.slots) {
    throw new RangeError(`metric block: slot ${slot} outside 0..${block.slots - 1}`);
  }
  for (const column of block.columns) {
    if (!row.has(column.id)) throw new RangeError(`metric block: row lacks column ${column.id}`);
  }
  if (row.size !== block.columns.length)
    throw new RangeError('metric block: row has columns the block lacks');
  const last = block.present.at(-1);
  let index = block.present.length;
  if (last !== undefined && slot <= last) {
    index = block.present.findIndex((s) => s >= slot);
    if (block.present[index] === slot) {
      for (const column of block.columns) column.values[index] = row.get(column.id) as number;
      return;
    }
  }
  block.present.splice(index, 0, slot);
  for (const column of block.columns) column.values.splice(index, 0, row.get(column.id) as number);
}

interface AppendedColumn {
  id: number;
  /** The zigzag varint deltas written so far. */
  deltas: Writer;
  /** The last value written (0 before any), which the next delta is taken from. */
  last: number;
}

/**
 * A block being filled in slot order, kept in its encoded form: a presence bitmap and each column's
 * deltas so far. Appending a row writes one delta per column, and `bytes()` puts the parts together
 * (a copy, no encoding), so a block filled one row per collection costs the same at every collection
 * instead of growing with the rows already in it. `bytes()` is exactly `encodeBlock(toBlock())`.
 */
export class BlockAppender {
  private readonly bitmap: Uint8Array;
  private readonly columns: AppendedColumn[];
  private count = 0;
  private lastSlot = -1;

  private constructor(
    readonly slots: number,
    columnIds: readonly number[],
  ) {
    this.bitmap = new Uint8Array(Math.ceil(slots / 8));
    this.columns = columnIds.map((id) => ({ id, deltas: new Writer(), last: 0 }));
  }

  static empty(slots: number, columnIds: readonly number[]): BlockAppender {
    return new BlockAppender(slots, columnIds);
  }

  /** An appender holding the block's rows (a block read back from the store). */
  static of(block: Block): BlockAppender {
    const appender = new BlockAppender(
      block.slots,
      block.columns.map((c) => c.id),
    );
    for (let i = 0; i < block.present.length; i++) {
      appender.append(
        block.present[i] as number,
        block.columns.map((c) => c.values[i] as number),
      );
    }
    return appender;
  }

  /** Rows held. */
  get points(): number {
    return this.count;
  }

  /** The latest slot holding a row, or -1. */
  get latestSlot(): number {
    return this.lastSlot;
  }

  /** The column ids, in the order `append` takes their values. */
  columnIds(): number[] {
    return this.columns.map((c) => c.id);
  }

  /**
   * Adds a row after every row held: `values` in the order of columnIds(). A slot at or before the
   * latest is refused (the caller puts such a row into toBlock() with putRow and starts again from it).
   */
  append(slot: number, values: readonly number[]): void {
    if (!Number.isInteger(slot) || slot <= this.lastSlot || slot >= this.slots) {
      throw new RangeError(
        `metric block: cannot append slot ${slot} after ${this.lastSlot} of ${this.slots}`,
      );
    }
    if (values.length !== this.columns.length) {
      throw new RangeError(`metric block: ${values.length} values for ${this.columns.length} columns`);
    }
    for (let c = 0; c < this.columns.length; c++) {
      const column = this.columns[c] as AppendedColumn;
      const value = values[c] as number;
      column.deltas.signed(value - column.last);
      column.last = value;
    }
    this.bitmap[slot >> 3] = (this.bitmap[slot >> 3] as number) | (1 << (slot & 7));
    this.lastSlot = slot;
    this.count++;
  }

  /** Keeps only the columns with these ids (the others' values are dropped with them). */
  keepColumns(ids: readonly number[]): void {
    for (let c = this.columns.length - 1; c >= 0; c--) {
      if (!ids.includes((this.columns[c] as AppendedColumn).id)) this.columns.splice(c, 1);
    }
  }

  /** The block's plain encoding (format 1), as encodeBlock writes it. */
  bytes(): Buffer {
    let length = 1 + varintLength(this.slots) + this.bitmap.length + varintLength(this.columns.length);
    for (const column of this.columns) length += varintLength(column.id) + column.deltas.length;
    const out = Buffer.allocUnsafe(length);
    out[0] = PLAIN;
    let at = writeVarint(out, 1, this.slots);
    out.set(this.bitmap, at);
    at = writeVarint(out, at + this.bitmap.length, this.columns.length);
    for (const column of this.columns) {
      at = writeVarint(out, at, column.id);
      at = column.deltas.copyTo(out, at);
    }
    return out;
  }

  toBlock(): Block {
    return decodeBlock(this.bytes());
  }
}
