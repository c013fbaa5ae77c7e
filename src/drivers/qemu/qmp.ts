/**
 * A small client of the QEMU Machine Protocol over a VM's unix socket: JSON objects one per line; the
 * server greets, `qmp_capabilities` leaves negotiation, then each command gets one answer (`return` or
 * `error`) carrying the `id` it was sent with, with asynchronous events in between.
 *
 * The driver opens a connection for each piece of work and closes it after (`withQmp`): QEMU serves one
 * client per monitor socket at a time, and a short connection never outlives a Nimbus that restarts.
 */
import net from 'node:net';

export class QmpError extends Error {
  constructor(
    readonly command: string,
    readonly qmpClass: string,
    description: string,
  ) {
    super(`QMP ${command}: ${qmpClass}: ${description}`);
  }
}

type Pending = { command: string; resolve(value: unknown): void; reject(error: Error): void };

export class QmpClient {
  private buffer = '';
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();
  private closedError: Error | null = null;
  readonly events: { event: string; data?: unknown }[] = [];

  private constructor(private readonly socket: net.Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('error', (error) => this.fail(error));
    socket.on('close', () => this.fail(new Error('QMP connection closed')));
  }

  /** Connects, reads the greeting and negotiates; rejects within `timeoutMs`. */
  static connect(socketPath: string, timeoutMs = 5000): Promise<QmpClient> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(socketPath);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`QMP ${socketPath}: no greeting within ${timeoutMs} ms`));
      }, timeoutMs);
      let greeting = '';
      const onData = (chunk: Buffer) => {
        greeting += chunk.toString('utf8');
        const newline = greeting.indexOf('\n');
        if (newline < 0) return;
        socket.off('data', onData);
        socket.off('error', onError);
        clearTimeout(timer);
        const client = new QmpClient(socket);
        client.buffer = greeting.slice(newline + 1);
        client
          .execute('qmp_capabilities')
          .then(() => resolve(client))
          .catch((error: Error) => {
            client.close();
            reject(error);
          });
      };
      const onError = (error: Error) => {
        clearTimeout(timer);
        reject(error);
      };
      socket.on('data', onData);
      socket.once('error', onError);
    });
  }

  /** Sends a command; resolves with its `return`, rejects with a QmpError or when the connection goes. */
  execute<T = unknown>(command: string, args?: Record<string, unknown>, timeoutMs = 30_000): Promise<T> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = `n${this.nextId++}`;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`QMP ${command}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        command,
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value as T);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.socket.write(
        `${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id })}\n`,
      );
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    for (let newline = this.buffer.indexOf('\n'); newline >= 0; newline = this.buffer.indexOf('\n')) {
      const line = this.buffer.slice(0, newline).trim();
      this.buffer = this.buffer.slice(newline + 1);
      if (line) this.onMessage(line);
    }
  }

  private onMessage(line: string): void {
    let message: {
      id?: string;
      return?: unknown;
      error?: { class: string; desc: string };
      event?: string;
      data?: unknown;
    };
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (message.event) {
      this.events.push({ event: message.event, data: message.data });
      if (this.events.length > 100) this.events.shift();
      return;
    }
    const pending = message.id ? this.pending.get(message.id) : undefined;
    if (!pending || !message.id) return;
    this.pending.delete(message.id);
    if (message.error) pending.reject(new QmpError(pending.command, message.error.class, message.error.desc));
    else pending.resolve(message.return);
  }

  private fail(error: Error): void {
    if (this.closedError) return;
    this.closedError = error;
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
  }
}

/** Opens a connection, runs `work` with it, closes it. */
export async function withQmp<T>(socketPath: string, work: (qmp: QmpClient) => Promise<T>): Promise<T> {
  const qmp = await QmpClient.connect(socketPath);
  try {
    return await work(qmp);
  } finally {
    qmp.close();
  }
}
