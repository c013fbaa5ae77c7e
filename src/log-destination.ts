/**
 * Where log lines go: pino's asynchronous file writer (sonic-boom), handed one write per event-loop turn
 * rather than one per line.
 *
 * sonic-boom measures the byte length of its whole pending buffer on every write. With one access-log
 * line per request that made each line cost about 2 µs under load, more than formatting it (see
 * docs/benchmarks.md). Lines logged during a turn are collected here and passed on joined, before the
 * next turn's I/O. Nothing is lost at exit: flush() and flushSync() pass on what is collected first, and
 * a process exit (crash included) runs flushSync().
 */
import { register } from 'on-exit-leak-free';
import pino, { type DestinationStream } from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

export class TurnBatchedDestination implements DestinationStream {
  private lines: string[] = [];
  private handOverScheduled = false;
  private targetClosed = false;
  private readonly handOverLater = () => this.handOver();

  constructor(private readonly target: SonicBoom) {
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
  static stdout(): TurnBatchedDestination {
    return new TurnBatchedDestination(pino.destination({ dest: 1, sync: false, minLength: 4096 }));
  }

  write(line: string): void {
    this.lines.push(line);
    if (!this.handOverScheduled) {
      this.handOverScheduled = true;
      setImmediate(this.handOverLater);
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
    this.handOverScheduled = false;
    if (this.lines.length === 0 || this.targetClosed) return;
    const joined = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join('');
    this.lines = [];
    this.target.write(joined);
  }
}
