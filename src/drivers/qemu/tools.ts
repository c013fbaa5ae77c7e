/**
 * Outside programs (qemu-img, apt-get, mke2fs, genisoimage…) as the QEMU driver and the image builder run
 * them: always an argument array through execFile, never a command line through a shell, so nothing a user
 * typed (names, tags, user data) can become a command. A failure carries the program's own stderr.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

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

/** Where execFile would find `program` on `pathVariable` (an executable file), or null. */
export function findOnPath(program: string, pathVariable = process.env.PATH ?? ''): string | null {
  for (const dir of pathVariable.split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, program);
    try {
      if (statSync(candidate).isFile()) {
        accessSync(candidate, constants.X_OK);
        return candidate;
      }
    } catch {}
  }
  return null;
}

/** A program something runs, any one of `programs` doing, and the Debian package that installs it. */
export interface ProgramNeed {
  programs: readonly string[];
  debianPackage: string;
}

/** The needs of which no program is on PATH. */
export function missingPrograms(needs: readonly ProgramNeed[], pathVariable?: string): ProgramNeed[] {
  return needs.filter((need) => need.programs.every((program) => findOnPath(program, pathVariable) === null));
}

/** "genisoimage or xorriso (Debian package genisoimage), …; install them with apt-get install …" */
export function describeMissing(missing: readonly ProgramNeed[]): string {
  const named = missing.map((need) => `${need.programs.join(' or ')} (Debian package ${need.debianPackage})`);
  const packages = [...new Set(missing.map((need) => need.debianPackage))];
  return `${named.join(', ')}; install them with: apt-get install ${packages.join(' ')}`;
}
