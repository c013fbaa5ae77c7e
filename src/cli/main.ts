/**
 * `bin/nimbus`: serve | admin … | version here; every other command (login, instances, …) is the client
 * CLI of src/cli/client. Each is loaded only when asked for, so the client does not load the server's
 * code and the server does not load the client's. Exit codes: 0 ok, 1 the command failed, 2 wrong usage
 * (the client adds 3 authentication, 4 not found, 5 timeout).
 */
import { readFileSync } from 'node:fs';

async function serve(): Promise<void> {
  // Loaded here so that operator commands do not pay for the HTTP stack.
  const { loadConfig } = await import('../platform/config.js');
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

/** The operator commands, with their failures as usage (2) or the domain error's JSON (1). */
async function admin(args: string[]): Promise<number> {
  const { ConfigError, loadConfig } = await import('../platform/config.js');
  const { DomainError } = await import('../platform/errors.js');
  const { runAdmin, UsageError } = await import('./admin.js');
  try {
    return await runAdmin(args, loadConfig(), {
      out: (line) => process.stdout.write(`${line}\n`),
      progress: (line) => process.stderr.write(`${line}\n`),
    });
  } catch (error) {
    if (error instanceof Error && error.name === 'ImageBuildError') {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
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

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve': {
      const { ConfigError } = await import('../platform/config.js');
      try {
        await serve();
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        process.stderr.write(`${error.message}\n`);
        return 2;
      }
      return 0;
    }
    case 'admin':
      return admin(rest);
    case 'version':
    case '--version': {
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
        version: string;
      };
      process.stdout.write(`${pkg.version}\n`);
      return 0;
    }
    default: {
      const { runClient } = await import('./client/program.js');
      return runClient(argv);
    }
  }
}
