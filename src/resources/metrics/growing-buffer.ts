/**
 * Bytes written one after another into a buffer that doubles when full: what the encoders of metric
 * blocks (blocks.ts) and of the history answer (history-body.ts) write into, each adding its own forms.
 */
export class GrowingBuffer {
  protected buffer: Buffer;
  length = 0;

  constructor(capacity: number) {
    this.buffer = Buffer.allocUnsafe(capacity);
  }

  /** Makes sure `bytes` more fit; a writer of several bytes asks once, then stores them directly. */
  protected room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(bigger, 0, 0, this.length);
    this.buffer = bigger;
  }

  byte(value: number): void {
    this.room(1);
    this.buffer[this.length++] = value;
  }
}
