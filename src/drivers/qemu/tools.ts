/**
 * Outside programs (qemu-img, apt-get, mke2fs, genisoimage…) as the QEMU driver and the image builder run
 * them: always an argument array through execFile, never a command line through a shell, so nothing a user
 * typed (names, tags, user data) can become a command. A failure carries the program's own stderr.
 */
import { execFile } from 'node:child_process';

export class ToolError extends Error {
  constructor(
    readonly program: string,
    readonly args: readonly string[],
    readonly stderr: string,
    readonly code: number | string | null,
  ) {
    super(`${program} ${args.join(' ')} failed (${code ?? 'signal'}): ${stderr.trim().slice(-2000)}`);
  }
}

export interface RunOptions {
  cwd?: string;
  /** Milliseconds before the program is killed; default 10 minutes. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

/** Runs `program` with `args`; resolves with its stdout, rejects with a ToolError. */
export function run(program: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      program,
      args,
      {
        cwd: options.cwd,
        timeout: options.timeoutMs ?? 600_000,
        maxBuffer: 64 * 1024 * 1024,
        env: options.env ?? { ...process.env, LC_ALL: 'C' },
        encoding: 'utf8',
      },
      (error, stdout, stderr) => {
        if (error) {
          const code = (error as NodeJS.ErrnoException & { code?: number | string }).code ?? null;
          reject(new ToolError(program, args, stderr || error.message, code));
        } else resolve(stdout);
      },
    );
  });
}

/** Whether `program` can be run (found on PATH and executable), by asking it for its version. */
export async function available(program: string, versionArgs: readonly string[] = ['--version']) {
  try {
    await run(program, versionArgs, { timeoutMs: 20_000 });
    return true;
  } catch (error) {
    return !(error instanceof ToolError && error.code === 'ENOENT');
  }
}
