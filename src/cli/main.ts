/** `bin/nimbus`: serve | admin … | help. Exit codes: 0 ok, 1 the command failed, 2 wrong usage. */
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig } from '../config.js';
import { DomainError } from '../services/errors.js';
import { runAdmin, UsageError } from './admin.js';

const USAGE = `Usage: nimbus <command>

Commands:
  serve            run the API server (configuration: NIMBUS_* environment variables, see README)
  admin <command>  operator commands; "nimbus admin help" lists them
  version          print the version`;

async function serve(): Promise<void> {
  // Loaded here so that operator commands do not pay for the HTTP stack.
  const { startServer } = await import('../main.js');
  const server = await startServer(loadConfig());
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    server.logger.info({ signal }, 'shutting down: finishing in-flight requests');
    server.close().then(
      () => process.exit(0),
      (error: unknown) => {
        server.logger.error({ err: error }, 'shutdown failed');
        server.logger.flush();
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve':
        await serve();
        return 0;
      case 'admin':
        await runAdmin(rest, loadConfig(), { out: (line) => process.stdout.write(`${line}\n`) });
        return 0;
      case 'version':
      case '--version': {
        const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
          version: string;
        };
        process.stdout.write(`${pkg.version}\n`);
        return 0;
      }
      case undefined:
      case 'help':
      case '--help':
        process.stdout.write(`${USAGE}\n`);
        return command === undefined ? 2 : 0;
      default:
        process.stderr.write(`Unknown command "${command}"\n\n${USAGE}\n`);
        return 2;
    }
  } catch (error) {
    if (
      error instanceof UsageError ||
      (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))
    ) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    if (error instanceof DomainError) {
      process.stderr.write(
        `${JSON.stringify({ error: { code: error.code, message: error.message, details: error.details } })}\n`,
      );
      return 1;
    }
    throw error;
  }
}
