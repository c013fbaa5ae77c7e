/**
 * The client CLI: every command that talks to a Nimbus server through the SDK (`nimbus instances list`,
 * `nimbus login` …). commander parses the command line and writes usage errors and help; this module
 * builds the command tree, runs it, and turns every failure into one line on stderr and its exit code
 * (exit-codes.ts).
 */
import { Command, CommanderError, Option } from 'commander';
import { accountCommand } from './commands/account.js';
import { alertsCommand } from './commands/alerts.js';
import { billingCommand } from './commands/billing.js';
import { catalogCommand } from './commands/catalog.js';
import { eventsCommand } from './commands/events.js';
import { firewallCommand } from './commands/firewall.js';
import { instancesCommand } from './commands/instances.js';
import { keysCommand } from './commands/keys.js';
import { metricsCommand } from './commands/metrics.js';
import { publicIpsCommand } from './commands/public-ips.js';
import { example } from './commands/shared.js';
import { snapshotsCommand } from './commands/snapshots.js';
import { sshKeysCommand } from './commands/ssh-keys.js';
import { volumesCommand } from './commands/volumes.js';
import { vpnCommand } from './commands/vpn.js';
import { webhooksCommand } from './commands/webhooks.js';
import { completionCommand } from './completion.js';
import { resolveConnection } from './context.js';
import { EXIT, exitCodeFor, UsageError } from './exit-codes.js';
import { describeFailure } from './failure.js';
import { loginCommand, logoutCommand, whoamiCommand } from './login.js';
import { OUTPUT_FORMATS } from './output.js';

/** Commands of `bin/nimbus` that are not the client's (src/cli/main.ts runs them); listed in --help. */
export const SERVER_COMMANDS: ReadonlyArray<readonly [name: string, description: string]> = [
  ['serve', 'run the API server (configuration: NIMBUS_* environment variables, see README)'],
  ['admin <command>', 'operator commands on the server\'s own store; "nimbus admin help" lists them'],
  ['version', 'print the version'],
];

export function buildProgram(): Command {
  const program = new Command('nimbus')
    .description(
      'Nimbus command-line client: manage instances, volumes, networks and your account over the API',
    )
    .addOption(new Option('-o, --output <format>', 'output format').choices(OUTPUT_FORMATS).default('table'))
    .option('--no-headers', 'tables without their header line')
    .option('--no-color', 'no colour (also: NO_COLOR=1; never when output is not a terminal)')
    .option(
      '--profile <name>',
      'credentials profile from `nimbus login --profile` (default: NIMBUS_PROFILE, else "default")',
    )
    .option('-v, --verbose', 'more detail on stderr (retries with their Idempotency-Key)')
    .showHelpAfterError('(add --help for usage)')
    .showSuggestionAfterError(true);
  program.addHelpText(
    'after',
    `\nServer commands:\n${SERVER_COMMANDS.map(([name, text]) => `  ${name.padEnd(17)}${text}`).join('\n')}\n\n` +
      'Environment: NIMBUS_API_KEY and NIMBUS_URL override the profile; NIMBUS_CA_FILE trusts a CA (PEM),\n' +
      'NIMBUS_TLS_FINGERPRINT pins a certificate; NO_COLOR turns colour off.\n' +
      'Exit codes: 0 ok, 1 API error, 2 usage, 3 authentication, 4 not found, 5 timeout.\n',
  );
  example(
    program,
    'nimbus login',
    'nimbus instances create web-1 --type compute-2x --region us-east-1 --image ubuntu-24.04 --ssh-key ~/.ssh/id_ed25519.pub --wait',
    'nimbus instances list -o json',
  );
  program
    .addCommand(loginCommand())
    .addCommand(logoutCommand())
    .addCommand(whoamiCommand())
    .addCommand(instancesCommand())
    .addCommand(sshKeysCommand())
    .addCommand(keysCommand())
    .addCommand(accountCommand())
    .addCommand(eventsCommand())
    .addCommand(catalogCommand())
    .addCommand(volumesCommand())
    .addCommand(snapshotsCommand())
    .addCommand(firewallCommand())
    .addCommand(publicIpsCommand())
    .addCommand(vpnCommand())
    .addCommand(webhooksCommand())
    .addCommand(metricsCommand())
    .addCommand(alertsCommand())
    .addCommand(billingCommand())
    .addCommand(completionCommand(program));
  // Every command: commander throws instead of exiting, so the exit code is decided in one place below.
  const configure = (command: Command) => {
    command.exitOverride().showHelpAfterError('(add --help for usage)');
    for (const child of command.commands) configure(child);
  };
  configure(program);
  return program;
}

/**
 * Resolves once everything written to `stream` so far has been handed to the system. bin/nimbus exits
 * the process right after the command, and a pipe that is not blocking (zsh's `$(…)` makes such ones)
 * takes 64 KiB at a time: without this wait the rest of a long output was lost.
 */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.writableLength === 0 || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    // Write callbacks run in order, so this one runs once every earlier chunk is written (or failed).
    stream.write('', () => resolve());
  });
}

/** Runs the client command line (argv without node and the script); returns the exit code. */
export async function runClient(argv: string[]): Promise<number> {
  const code = await runCommand(argv);
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  return code;
}

async function runCommand(argv: string[]): Promise<number> {
  const program = buildProgram();
  const [first] = argv;
  if (first === undefined || (first === 'help' && argv.length === 1)) {
    // Bare `nimbus` is a usage mistake (exit 2) that deserves the overview; `nimbus help` asked for it.
    process.stdout.write(program.helpInformation());
    return first === undefined ? EXIT.usage : EXIT.ok;
  }
  // `help <command>` is commander's own, not in the list of commands.
  const known = ['help', ...program.commands.flatMap((command) => [command.name(), ...command.aliases()])];
  if (!first.startsWith('-') && !known.includes(first)) {
    process.stderr.write(`Unknown command "${first}": "nimbus --help" lists the commands\n`);
    return EXIT.usage;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end in a CommanderError too, with code 0; commander has printed the message.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    let url: string | null = null;
    try {
      url = resolveConnection(program.opts()).url;
    } catch {
      // an unreadable config file is reported as the error itself
    }
    process.stderr.write(`${describeFailure(error, url)}\n`);
    return error instanceof UsageError ? EXIT.usage : exitCodeFor(error);
  }
}
