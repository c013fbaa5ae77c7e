/**
 * `--wait`: follows a resource until it reaches the status its action leads to, with a spinner and the
 * elapsed time on stderr (a plain line at the end when stderr is not a terminal). The SDK's waitFor does
 * the polling and the failure rules: a resource that ends `error` or `failed` throws ResourceFailedError
 * (exit 1), the timeout WaitTimeoutError (exit 5).
 */
import { type StateAction, type StatefulKind, targetOf, type WaitableResource } from '@nimbus/sdk';
import { InvalidArgumentError, Option } from 'commander';
import ora from 'ora';
import type { Session } from './session.js';

export interface WaitFlags {
  wait?: boolean;
  timeout: number;
}

export const DEFAULT_WAIT_SECONDS = 300;

/** The --wait and --timeout options of an asynchronous command. */
export function waitOptions(target: string): Option[] {
  return [
    new Option('--wait', `wait until it is ${target}, showing progress`),
    new Option('--timeout <seconds>', 'with --wait: give up after this long (exit code 5)')
      .default(DEFAULT_WAIT_SECONDS)
      .argParser((value) => {
        const seconds = Number(value);
        if (!Number.isFinite(seconds) || seconds <= 0)
          throw new InvalidArgumentError('expected a number of seconds > 0');
        return seconds;
      }),
  ];
}

/**
 * Where --wait follows `action` (or `create`) of `kind` to: the target of the server's published state
 * table (`deleted` when the resource goes), so the CLI never keeps its own copy of where actions lead.
 */
export function tableTarget<K extends StatefulKind>(kind: K, action: StateAction<K> | 'create'): string {
  const target = targetOf(kind, action);
  if (target === undefined) throw new Error(`The ${kind} state table gives ${action} no target`);
  return target;
}

const POLL_INTERVAL_MS = 500;

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Waits for `id` to be `target` ('deleted': gone); returns the resource as last read. */
export async function waitForStatus(
  session: Session,
  id: string,
  target: string,
  flags: WaitFlags,
): Promise<WaitableResource | null> {
  const started = Date.now();
  let status = '…';
  const text = () => `Waiting for ${id} to be ${target}: ${status} (${seconds(Date.now() - started)})`;
  const spinner = ora({ text: text(), stream: process.stderr, discardStdin: false });
  const interactive = spinner.isEnabled;
  if (interactive) spinner.start();
  const tick = interactive ? setInterval(() => (spinner.text = text()), 100) : null;
  try {
    const resource = await session.nimbus.waitFor(id, target, {
      timeoutMs: flags.timeout * 1000,
      intervalMs: POLL_INTERVAL_MS,
      onPoll: (seen) => {
        status = seen.status;
      },
    });
    const done = `${id} is ${target} after ${seconds(Date.now() - started)}`;
    if (interactive) spinner.succeed(done);
    else process.stderr.write(`${done}\n`);
    return resource;
  } catch (error) {
    const failed = `${id} did not become ${target} (${status} after ${seconds(Date.now() - started)})`;
    if (interactive) spinner.fail(failed);
    throw error;
  } finally {
    if (tick) clearInterval(tick);
  }
}
