/**
 * One run of a client command: its options merged with the global ones, the output settings, and the SDK
 * client, made only when the command first needs the server (so `--help`, `completion` and `logout` work
 * without credentials) and closed when the command ends.
 */
import type { Nimbus } from '@nimbus/sdk';
import type { Command } from 'commander';
import {
  type Connection,
  connect,
  type GlobalOptions,
  outputSettings,
  resolveConnection,
} from './context.js';
import type { OutputSettings } from './output.js';

export class Session {
  readonly options: GlobalOptions;
  readonly out: OutputSettings;
  private client: Nimbus | null = null;
  private resolved: Connection | null = null;

  constructor(command: Command) {
    this.options = command.optsWithGlobals<GlobalOptions>();
    this.out = outputSettings(this.options);
  }

  get connection(): Connection {
    this.resolved ??= resolveConnection(this.options);
    return this.resolved;
  }

  get nimbus(): Nimbus {
    this.client ??= connect(this.connection, this.options);
    return this.client;
  }

  /** Whether output is for people (a table) rather than a program (json, yaml). */
  get humanOutput(): boolean {
    return this.out.format === 'table' || this.out.format === 'wide';
  }

  async close(): Promise<void> {
    await this.client?.close();
  }
}

/**
 * A commander action that runs `body` with a Session for the command, then closes it. Commander calls
 * actions with the arguments, the options and the command itself, last.
 */
export function withSession<O = Record<string, unknown>>(
  body: (session: Session, args: string[], options: O) => Promise<void>,
): (...received: unknown[]) => Promise<void> {
  return async (...received) => {
    const command = received.at(-1) as Command;
    const session = new Session(command);
    try {
      await body(session, command.processedArgs as string[], command.opts<O & Record<string, unknown>>());
    } finally {
      await session.close();
    }
  };
}
