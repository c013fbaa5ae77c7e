/**
 * `--help` on every command, each with examples that are themselves valid command lines, and the shell
 * completion scripts, each loaded into its real shell and asked to complete (bash, zsh and fish; npm test's set-up
 * installs zsh and fish, and in CI a missing one fails instead of being skipped).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Command, CommanderError } from 'commander';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/client/program.js';
import { BIN, baseEnv, ensureBuilt, runNimbus } from '../helpers/cli.js';

/** Every command under `command`, with the words that reach it. */
function allCommands(command: Command, path: string[] = []): { path: string[]; command: Command }[] {
  return [
    { path, command },
    ...command.commands.flatMap((child) => allCommands(child, [...path, child.name()])),
  ];
}

function helpText(command: Command): string {
  let text = '';
  command.configureOutput({ writeOut: (chunk) => (text += chunk), writeErr: (chunk) => (text += chunk) });
  command.outputHelp();
  return text;
}

/** Words of a simple command line ("quoted words" kept whole), or null for one that needs a shell. */
function words(line: string): string[] | null {
  if (/[|<>$&;`#]/.test(line)) return null;
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((match) => match[1] ?? match[2]!);
}

const has = (shell: string) => {
  try {
    execFileSync('which', [shell], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
};

describe('nimbus --help', () => {
  beforeAll(() => ensureBuilt(), 180_000);

  it('every command has a description and examples that name it', () => {
    const commands = allCommands(buildProgram());
    expect(commands.length).toBeGreaterThan(80);
    for (const { path, command } of commands) {
      const text = helpText(command);
      expect(command.description(), path.join(' ')).not.toBe('');
      expect(text, `nimbus ${path.join(' ')} --help`).toMatch(/\nExamples:\n {2}\$ /);
      expect(text, `nimbus ${path.join(' ')} --help`).toContain(`nimbus ${path.join(' ')}`.trim());
    }
  });

  it('every example is a command line the CLI accepts', async () => {
    const examples = new Set<string>();
    for (const { command } of allCommands(buildProgram())) {
      for (const match of helpText(command).matchAll(/^ {2}\$ (nimbus .*)$/gm)) examples.add(match[1]!);
    }
    let checked = 0;
    for (const example of examples) {
      const argv = words(example);
      if (argv === null) continue;
      // A fresh tree whose actions do nothing: only parsing is checked, nothing is sent anywhere.
      const program = buildProgram();
      for (const { command } of allCommands(program)) {
        command.configureOutput({ writeOut: () => {}, writeErr: () => {} });
        if (command.commands.length === 0) command.action(() => {});
      }
      try {
        await program.parseAsync(argv.slice(1), { from: 'user' });
      } catch (error) {
        // An example may show --help: commander ends that with an "error" of exit code 0.
        if (error instanceof CommanderError && error.exitCode === 0) continue;
        expect.fail(`"${example}": ${error instanceof CommanderError ? error.message : String(error)}`);
      }
      checked += 1;
    }
    expect(checked).toBeGreaterThan(60);
  });

  it('through bin/nimbus: help on a command, the overview with the server commands, bare nimbus exits 2', async () => {
    const env = baseEnv('/nonexistent');
    const create = await runNimbus(['instances', 'create', '--help'], { env });
    expect(create.code).toBe(0);
    expect(create.stdout).toMatch(/^Usage: nimbus instances create \[options\] <name>/);
    expect(create.stdout).toContain(
      '$ nimbus instances create web-1 --type compute-2x --region us-east-1 --image ubuntu-24.04 --ssh-key ~/.ssh/id_ed25519.pub --wait',
    );
    const overview = await runNimbus(['--help'], { env });
    expect(overview.code).toBe(0);
    expect(overview.stdout).toMatch(/^ {2}serve {2,}run the API server/m);
    expect(overview.stdout).toMatch(/^ {2}admin <command> {2,}operator commands/m);
    expect(overview.stdout).toMatch(
      /Exit codes: 0 ok, 1 API error, 2 usage, 3 authentication, 4 not found, 5 timeout/,
    );
    const bare = await runNimbus([], { env });
    expect(bare.code).toBe(2);
    expect(bare.stdout).toMatch(/^Usage: nimbus/);
    expect((await runNimbus(['help'], { env })).code).toBe(0);
    expect((await runNimbus(['help', 'volumes'], { env })).stdout).toMatch(/^Usage: nimbus volumes/);
  }, 120_000);
});

describe('nimbus completion', () => {
  /** Each shell's script as `nimbus completion <shell>` prints it, saved once for all the tests below. */
  const scripts: Record<'bash' | 'zsh' | 'fish', string> = { bash: '', zsh: '', fish: '' };
  beforeAll(async () => {
    ensureBuilt();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-completion-'));
    for (const shell of ['bash', 'zsh', 'fish'] as const) {
      const printed = await runNimbus(['completion', shell], { env: baseEnv('/nonexistent') });
      expect(printed.code, printed.stderr).toBe(0);
      scripts[shell] = path.join(dir, `nimbus.${shell}`);
      writeFileSync(scripts[shell], printed.stdout);
    }
  }, 180_000);

  /** What bash offers after `line` (the last word is the one being completed; "" for a new word). */
  function bashComplete(line: string): Promise<string[]> {
    const typed = line.split(' ');
    const script = [
      `source '${scripts.bash}'`,
      `COMP_WORDS=(${typed.map((word) => `'${word}'`).join(' ')})`,
      `COMP_CWORD=${typed.length - 1}`,
      '_nimbus',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's own ${…}
      'printf "%s\\n" "${COMPREPLY[@]}"',
    ].join('\n');
    return new Promise((resolve, reject) => {
      execFile(
        'bash',
        ['-c', script],
        { env: baseEnv('/nonexistent'), timeout: 20_000 },
        (error, stdout, stderr) =>
          error
            ? reject(new Error(`${error.message}\n${stderr}`))
            : resolve(stdout.split('\n').filter(Boolean)),
      );
    });
  }

  it('bash completes commands, subcommands, options and their choices from the command tree', async () => {
    expect(await bashComplete('nimbus inst')).toEqual(['instances']);
    expect(await bashComplete('nimbus instances cr')).toEqual(['create']);
    expect(await bashComplete('nimbus vpn peers a')).toEqual(['add']);
    expect(await bashComplete('nimbus instances create web-1 --fire')).toEqual(['--firewall-preset']);
    expect(await bashComplete('nimbus instances create web-1 --firewall-preset ')).toEqual([
      'ssh-only',
      'web',
      'allow-all',
      'none',
    ]);
    expect(await bashComplete('nimbus -o ')).toEqual(['table', 'wide', 'json', 'yaml']);
    // A global option's value is not taken for a command.
    // (Aliases such as "ls" work when typed but are not offered: one word per command.)
    expect(await bashComplete('nimbus --profile staging instances l')).toEqual(['list']);
    expect(await bashComplete('nimbus completion ')).toEqual(['bash', 'zsh', 'fish']);
    const top = await bashComplete('nimbus ');
    expect(top).toEqual(
      expect.arrayContaining([
        'login',
        'instances',
        'ssh-keys',
        'keys',
        'account',
        'events',
        'catalog',
        'volumes',
        'snapshots',
        'firewall',
        'vpn',
        'webhooks',
        'metrics',
        'billing',
        'completion',
      ]),
    );
    // Once the command is complete, a word that is not an option offers its subcommands only.
    expect(await bashComplete('nimbus billing invoices ')).toEqual(['list', 'get', 'download']);
    expect(await bashComplete('nimbus billing invoices download inv_1 --format ')).toEqual(['pdf', 'csv']);
  });

  /**
   * zsh: the script's function run with the words typed as zsh's
   * completion system sets them; _describe (what would show the menu) prints the candidates instead, and
   * the test keeps those that start with the word being completed, as the menu would.
   */
  function zshComplete(line: string): string[] {
    const typed = line.split(' ');
    const script = [
      // compinit's compdef registers the function (checked above); here only the function itself runs.
      'compdef() { :; }',
      `source '${scripts.zsh}'`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: zsh's own ${…}
      '_describe() { local name=$2; print -rl -- "${(@P)name}" }',
      "_files() { print -r -- '<files>' }",
      `words=(${typed.map((word) => `'${word}'`).join(' ')})`,
      `CURRENT=${typed.length}`,
      '_nimbus',
    ].join('\n');
    const output = execFileSync('zsh', ['-f', '-c', script], {
      env: baseEnv(mkdtempSync(path.join(os.tmpdir(), 'nimbus-zsh-'))),
      encoding: 'utf8',
    });
    const current = typed.at(-1)!;
    return output
      .split('\n')
      .filter(Boolean)
      .map((entry) => entry.split(/(?<!\\):/)[0]!.replace(/\\:/g, ':'))
      .filter((word) => word.startsWith(current));
  }

  /** fish: the script sourced into a fish without configuration, asked with `complete -C`. */
  function fishComplete(line: string): string[] {
    const output = execFileSync(
      'fish',
      ['--no-config', '-c', `source '${scripts.fish}'; complete -C '${line}'`],
      { env: baseEnv(mkdtempSync(path.join(os.tmpdir(), 'nimbus-fish-'))), encoding: 'utf8' },
    );
    return output
      .split('\n')
      .filter(Boolean)
      .map((entry) => entry.split('\t')[0]!);
  }

  /** In CI (npm test's set-up, scripts/test-setup.mjs, installs both shells) a missing shell fails the test instead of skipping its checks. */
  function shellAvailable(shell: string): boolean {
    if (has(shell)) return true;
    expect(process.env.CI, `${shell} is not installed (npm test's set-up installs it as root)`).not.toBe(
      'true',
    );
    return false;
  }

  it("loads as each script's header says: source <(…) in bash and zsh, a pipe to source in fish", () => {
    const nimbus = `'${process.execPath}' '${BIN}'`;
    const env = baseEnv(mkdtempSync(path.join(os.tmpdir(), 'nimbus-shell-')));
    const run = (shell: string, args: string[]) =>
      execFileSync(shell, args, { env, encoding: 'utf8' }).trim();
    expect(run('bash', ['-c', `source <(${nimbus} completion bash); complete -p nimbus`])).toBe(
      'complete -o default -F _nimbus nimbus',
    );
    if (shellAvailable('zsh')) {
      // The zsh script is over 64 KiB: read through zsh's $(…) (a pipe that does not block) it arrives whole
      // only because bin/nimbus waits for its output to be written before it exits.
      const length = readFileSync(scripts.zsh).length;
      expect(length).toBeGreaterThan(65_536);
      expect(run('zsh', ['-f', '-c', `x="$(${nimbus} completion zsh)"; print -rn -- "$x" | wc -c`])).toBe(
        String(length - 1), // $(…) drops the final newline
      );
      const loaded = `autoload -U compinit && compinit -u -D; source <(${nimbus} completion zsh); print -r -- $_comps[nimbus]`;
      expect(run('zsh', ['-f', '-c', loaded])).toBe('_nimbus');
    }
    if (shellAvailable('fish')) {
      expect(
        run('fish', ['--no-config', '-c', `${nimbus} completion fish | source; complete -C 'nimbus metr'`]),
      ).toMatch(/^metrics\t/);
    }
  }, 120_000);

  it('zsh completes commands, subcommands, options and choices (its function run in a real zsh)', (context) => {
    if (!shellAvailable('zsh')) return context.skip();
    expect(zshComplete('nimbus inst')).toEqual(['instances']);
    expect(zshComplete('nimbus instances cr')).toEqual(['create']);
    expect(zshComplete('nimbus vpn peers a')).toEqual(['add']);
    expect(zshComplete('nimbus instances create web-1 --fire')).toEqual(['--firewall-preset']);
    expect(zshComplete('nimbus instances create web-1 --firewall-preset ')).toEqual([
      'ssh-only',
      'web',
      'allow-all',
      'none',
    ]);
    expect(zshComplete('nimbus -o ')).toEqual(['table', 'wide', 'json', 'yaml']);
    expect(zshComplete('nimbus --profile staging instances l')).toEqual(['list']);
    expect(zshComplete('nimbus completion ')).toEqual(['bash', 'zsh', 'fish']);
    expect(zshComplete('nimbus metrics ')).toEqual(['get', 'watch']);
    // An option that takes a file name hands over to zsh's file completion.
    expect(zshComplete('nimbus instances create web-1 --user-data-file ')).toEqual(['<files>']);
  });

  it('fish completes commands, subcommands, options and choices (complete -C in a real fish)', (context) => {
    if (!shellAvailable('fish')) return context.skip();
    expect(fishComplete('nimbus inst')).toEqual(['instances']);
    expect(fishComplete('nimbus instances cr')).toEqual(['create']);
    expect(fishComplete('nimbus vpn peers a')).toEqual(['add']);
    expect(fishComplete('nimbus instances create web-1 --fire')).toEqual(['--firewall-preset']);
    // fish sorts what it offers.
    expect(fishComplete('nimbus instances create web-1 --firewall-preset ')).toEqual([
      'allow-all',
      'none',
      'ssh-only',
      'web',
    ]);
    expect(fishComplete('nimbus -o ')).toEqual(['json', 'table', 'wide', 'yaml']);
    expect(fishComplete('nimbus completion ')).toEqual(['bash', 'fish', 'zsh']);
    expect(fishComplete('nimbus billing ')).toEqual(['estimate', 'invoices', 'usage']);
  });

  it('prints zsh and fish scripts naming every command (checked by zsh -n and fish -n where installed)', async () => {
    const env = baseEnv('/nonexistent');
    const zsh = await runNimbus(['completion', 'zsh'], { env });
    expect(zsh.stdout).toMatch(/^#compdef nimbus/);
    expect(zsh.stdout).toContain("'instances create') entries=(");
    const fish = await runNimbus(['completion', 'fish'], { env });
    expect(fish.stdout).toContain("complete -c nimbus -n '__fish_use_subcommand' -a instances");
    expect(fish.stdout).toMatch(
      /-n '__fish_seen_subcommand_from instances; and not __fish_seen_subcommand_from create .*' -a create/,
    );
    if (shellAvailable('zsh')) execFileSync('zsh', ['-n', scripts.zsh]);
    if (shellAvailable('fish')) execFileSync('fish', ['-n', scripts.fish]);
    expect((await runNimbus(['completion', 'powershell'], { env })).code).toBe(2);
  }, 120_000);
});
