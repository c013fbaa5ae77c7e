/**
 * Where log lines go: pino's asynchronous file writer (sonic-boom), handed large chunks rather than
 * single lines.
 *
 * Every request writes an access-log line. Handed to sonic-boom one at a time, each line cost about
 * 2 µs under load: sonic-boom measures the byte length of its whole pending buffer on every write, and
 * each small file write wakes a thread-pool thread (docs/benchmarks.md). Here lines are collected and
 * passed on joined, once 64 KiB have gathered or 100 ms after the first of them, whichever comes first:
 * a busy server makes a few large writes a second, and a quiet one still shows each line within 100 ms.
 * Nothing is lost on an orderly exit or a crash: flush() and flushSync() pass on what is collected
 * first, and a process exit runs flushSync(). (A kill -9 loses at most the last 100 ms of lines.)
 */
import { register } from 'on-exit-leak-free';
import pino, { type DestinationStream } from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

export interface LogBuffering {
  /** Lines are passed on once this many characters have gathered… */
  chunkChars: number;
  /** …or this long after the first of them was written, whichever comes first. */
  maxDelayMs: number;
}

/**
 * sonic-boom's minLength for a target that writes each chunk as soon as it gets one. Not 0: with 0,
 * sonic-boom's flush(callback) calls back at once instead of after the pending writes.
 */
export const WRITE_AT_ONCE = 1;

export const DEFAULT_LOG_BUFFERING: LogBuffering = { chunkChars: 64 * 1024, maxDelayMs: 100 };

export class BufferedLogDestination implements DestinationStream {
  private lines: string[] = [];
  private chars = 0;
  private timer: NodeJS.Timeout | null = null;
  private targetClosed = false;
  private readonly handOverLater = () => this.handOver();

  constructor(
    private readonly target: SonicBoom,
    private readonly buffering: LogBuffering = DEFAULT_LOG_BUFFERING,
  ) {
    target.once('close', () => {
      this.targetClosed = true;
    });
    // pino's own exit hook flushes the target first; this one runs after it and adds what is collected.
    // It must not throw: that would turn an orderly exit into a crash (the target may not be open yet).
    register(this, (destination) => {
      try {
        destination.flushSync();
      } catch {
        // nothing more can be done for these lines while exiting
      }
    });
  }

  /** Standard output, as main.ts uses it. */
  static stdout(): BufferedLogDestination {
    return new BufferedLogDestination(pino.destination({ dest: 1, sync: false, minLength: WRITE_AT_ONCE }));
  }

  write(line: string): void {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= this.buffering.chunkChars) this.handOver();
    else if (this.timer === null) {
      this.timer = setTimeout(this.handOverLater, this.buffering.maxDelayMs);
      // Pending lines do not keep the process alive: the exit hook writes them.
      this.timer.unref();
    }
  }

  /** Writes out everything logged so far; `callback` runs once it is written. pino's logger.flush() calls it. */
  flush(callback?: (error?: Error) => void): void {
    this.handOver();
    this.target.flush(callback);
  }

  flushSync(): void {
    this.handOver();
    if (!this.targetClosed) this.target.flushSync();
  }

  private handOver(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.lines.length === 0 || this.targetClosed) return;
    const joined = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join('');
    this.lines = [];
    this.chars = 0;
    this.target.write(joined);
  }
}
