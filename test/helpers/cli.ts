/**
 * Runs the `nimbus` client as a user does: `bin/nimbus …` as a child process, with HOME in a temporary
 * directory (so ~/.config/nimbus is the test's own), and the server named by NIMBUS_URL with its
 * self-signed certificate trusted through NIMBUS_CA_FILE. Nothing of the test runner's own NIMBUS_*
 * environment reaches the child.
 */
import { execFile, execSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import type { TestServer } from './server.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BIN = path.join(ROOT, 'bin', 'nimbus');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
      newest = Math.max(newest, statSync(full).mtimeMs);
    }
  }
  return newest;
}

function stale(built: string, sources: string): boolean {
  return !existsSync(built) || statSync(built).mtimeMs < newestMtime(sources);
}

/**
 * `npm test` builds first (pretest); a direct `vitest run test/cli` may find dist/ or sdk/dist older than
 * the sources. The SDK is built first here because the CLI compiles against its declarations.
 */
export function ensureBuilt(): void {
  const run = (command: string) => {
    try {
      execSync(command, { cwd: ROOT, stdio: 'pipe' });
    } catch {
      // tsc still emits on type errors (typecheck reports those); a missing build fails the runs below.
    }
  };
  if (stale(path.join(ROOT, 'sdk', 'dist', 'index.js'), path.join(ROOT, 'sdk', 'src'))) {
    run('npx tsc -p sdk/tsconfig.json');
  }
  if (stale(path.join(ROOT, 'dist', 'cli', 'client', 'program.js'), path.join(ROOT, 'src'))) {
    run('npx tsc -p tsconfig.build.json');
  }
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  env?: Record<string, string | undefined>;
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  timeoutMs?: number;
  /** Told of stderr as it arrives (everything so far), for tests that act while the command runs. */
  onStderr?: (soFar: string) => void;
  /** Working directory (default: the repository root). */
  cwd?: string;
}

/** The environment of a user's shell: PATH and the like, without any NIMBUS_* of the test runner. */
export function baseEnv(home: string): Record<string, string> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] =>
        !entry[0].startsWith('NIMBUS_') &&
        entry[0] !== 'NO_COLOR' &&
        entry[0] !== 'XDG_CONFIG_HOME' &&
        entry[1] !== undefined,
    ),
  );
  return { ...env, HOME: home };
}

export function runNimbus(args: string[], options: RunOptions = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const env = Object.fromEntries(
      Object.entries(options.env ?? {}).filter((entry): entry is [string, string] => entry[1] !== undefined),
    );
    const child = spawn(process.execPath, [BIN, ...args], { cwd: options.cwd ?? ROOT, env, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      options.onStderr?.(stderr);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : -1), stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** A command still running: what it has printed so far, and its end. */
export interface RunningCli {
  pid: number;
  stdout(): string;
  stderr(): string;
  /** Sends a signal (SIGINT: as Ctrl-C does). */
  kill(signal: NodeJS.Signals): void;
  exited: Promise<CliRun>;
}

/** Starts `nimbus …args` and returns at once, for commands that run until stopped (metrics watch). */
export function startNimbus(args: string[], env: Record<string, string>, timeoutMs = 60_000): RunningCli {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exited = new Promise<CliRun>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : -1), stdout, stderr });
    });
  });
  return {
    pid: child.pid!,
    stdout: () => stdout,
    stderr: () => stderr,
    kill: (signal) => child.kill(signal),
    exited,
  };
}

export interface Cli {
  home: string;
  env: Record<string, string>;
  /** Runs `nimbus …args`; returns exit code, stdout and stderr. */
  run(...args: string[]): Promise<CliRun>;
  /** Runs `nimbus …args` in directory `cwd`. */
  runIn(cwd: string, ...args: string[]): Promise<CliRun>;
  /** Starts `nimbus …args` without waiting for it to end. */
  start(...args: string[]): RunningCli;
  /** Runs `nimbus …args -o json`, expects exit 0, returns the parsed stdout. */
  json<T = any>(...args: string[]): Promise<T>;
  /** The same CLI with more (or fewer: undefined) environment variables. */
  with(env: Record<string, string | undefined>): Cli;
}

function makeCli(home: string, env: Record<string, string>): Cli {
  const cli: Cli = {
    home,
    env,
    run: (...args) => runNimbus(args, { env }),
    runIn: (cwd, ...args) => runNimbus(args, { env, cwd }),
    start: (...args) => startNimbus(args, env),
    json: async (...args) => {
      const result = await runNimbus([...args, '-o', 'json'], { env });
      expect(result.code, `nimbus ${args.join(' ')}: ${result.stderr}`).toBe(0);
      return JSON.parse(result.stdout);
    },
    with: (extra) => {
      const next: Record<string, string> = { ...env };
      for (const [name, value] of Object.entries(extra)) {
        if (value === undefined) delete next[name];
        else next[name] = value;
      }
      return makeCli(home, next);
    },
  };
  return cli;
}

/** A CLI user of `server` holding `key`, with a home directory of their own. */
export function cliFor(server: TestServer, key: string, extra: Record<string, string> = {}): Cli {
  const home = mkdtempSync(path.join(os.tmpdir(), 'nimbus-cli-home-'));
  return makeCli(home, {
    ...baseEnv(home),
    NIMBUS_URL: server.url,
    NIMBUS_API_KEY: key,
    NIMBUS_CA_FILE: server.running.certFile,
    ...extra,
  });
}

/** Stderr's one error line: `Error: … (code: X, …, request_id: req_…)`. */
export function expectErrorLine(run: CliRun, exitCode: number, code: string | RegExp): void {
  expect(run.code, `exit code; stderr: ${run.stderr}`).toBe(exitCode);
  const lines = run.stderr.trim().split('\n');
  const line = lines.at(-1)!;
  expect(line).toMatch(/^Error: /);
  if (typeof code === 'string') expect(line).toContain(`code: ${code}`);
  else expect(line).toMatch(code);
}

/**
 * `nimbus serve` run until it exits, for a start it should refuse: its exit code (null: killed at the
 * timeout) and standard error. The ports are the system's pick; `env` goes over the runner's environment.
 */
export function serveUntilExit(
  env: Record<string, string>,
  timeoutMs = 50_000,
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, 'serve'],
      {
        env: {
          ...process.env,
          NIMBUS_HTTPS_PORT: '0',
          NIMBUS_HTTP_PORT: '0',
          NIMBUS_METRICS_PORT: '0',
          NIMBUS_METADATA_PORT: '0',
          ...env,
        },
        timeout: timeoutMs,
      },
      (error, _stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stderr }),
    );
  });
}
