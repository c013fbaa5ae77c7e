/**
 * Compact storage of metric samples: one block holds one instance's samples over a fixed window (an
 * hour of 10-second samples, a day of 5-minute rollups), every series of it together.
 *
 * Format. A block is a grid of `slots` time slots (slot i is `start + i × step`, which the store keeps
 * beside the block). Slots with a sample are marked in one presence bitmap shared by all columns, so a
 * gap costs one bit and reads back as a missing point, never a zero. Each column (a series: a metric, or
 * a metric's avg/min/max) holds one integer per present slot — the value in quanta of its metric
 * (domain/metric-catalog.ts) — written as the zigzag varint of its difference from the previous one.
 * Metrics move little from one sample to the next, so most differences take one or two bytes where a
 * float64 takes eight.
 *
 *   byte 0            format: 1 plain, 2 the rest deflated (raw DEFLATE)
 *   varint            slots
 *   ceil(slots/8) B   presence bitmap, slot i in bit (i % 8) of byte ⌊i / 8⌋
 *   varint            column count
 *   per column        varint id, then one zigzag varint delta per present slot
 *
 * Open blocks (the hour being collected) are written plain: they are re-encoded on every collection
 * and deflating each time would cost more than it saves. A block is deflated once, when sealed.
 *
 * Integers are handled arithmetically (not with 32-bit bit operations), so any integer of magnitude up
 * to 2^51 round-trips exactly.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';

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

class Writer {
  private buffer = Buffer.allocUnsafe(256);
  length = 0;

  private room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(bigger, 0, 0, this.length);
    this.buffer = bigger;
  }

  byte(value: number): void {
    this.room(1);
    this.buffer[this.length++] = value;
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
