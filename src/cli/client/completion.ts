/**
 * `nimbus completion bash|zsh|fish`: shell completion scripts generated from the command tree itself, so
 * a new command or option completes without anyone editing a script. Each script knows every command
 * path ("instances create") with its subcommands, options and choices; the shell walks the words typed so
 * far to find the path, then offers what that command takes.
 */
import { Argument, Command, type Option } from 'commander';
import { example } from './commands/shared.js';

interface Node {
  /** Words after `nimbus`, e.g. ['instances', 'create']. */
  path: string[];
  command: Command;
}

function walk(command: Command, path: string[] = []): Node[] {
  const nodes: Node[] = [{ path, command }];
  for (const child of command.commands) {
    if ((child as unknown as { _hidden?: boolean })._hidden) continue;
    nodes.push(...walk(child, [...path, child.name()]));
  }
  return nodes;
}

function visibleOptions(command: Command, root: Command): readonly Option[] {
  // Global options (on the root) are accepted after any subcommand too.
  return [...command.options, ...(command === root ? [] : root.options)].filter((option) => !option.hidden);
}

function optionWords(command: Command, root: Command): string[] {
  const words = visibleOptions(command, root).flatMap((option) =>
    [option.long, option.short].filter((w): w is string => !!w),
  );
  return [...words, '--help'];
}

/** Options that take a value: `--region us-east-1`, so the value is not mistaken for a command. */
function valueOptions(root: Command, nodes: Node[]): string[] {
  const names = new Set<string>();
  for (const { command } of nodes) {
    for (const option of visibleOptions(command, root)) {
      if (option.required || option.optional) {
        if (option.long) names.add(option.long);
        if (option.short) names.add(option.short);
      }
    }
  }
  return [...names].sort();
}

const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
const key = (path: string[]) => path.join(' ');

export function bashScript(root: Command): string {
  const nodes = walk(root);
  const candidates = nodes.map(({ path, command }) => {
    const words = [...command.commands.map((child) => child.name()), ...optionWords(command, root)];
    return `    ${quote(key(path))}) words=${quote(words.join(' '))} ;;`;
  });
  const choices = nodes.flatMap(({ path, command }) =>
    visibleOptions(command, root)
      .filter((option) => option.argChoices && option.long)
      .map(
        (option) =>
          `    ${quote(`${key(path)}|${option.long}`)}) words=${quote(option.argChoices!.join(' '))} ;;`,
      ),
  );
  return `# nimbus completion for bash: source <(nimbus completion bash), or save it in
# /etc/bash_completion.d/nimbus
_nimbus() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} path="" word words="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=\${COMP_WORDS[i]}
    case "$word" in
      ${valueOptions(root, nodes).join('|')}) ((i++)); continue ;;
      -*) continue ;;
    esac
    case "\${path:+$path }$word" in
      ${nodes
        .filter(({ path }) => path.length > 0)
        .map(({ path }) => quote(key(path)))
        .join('|')}) path="\${path:+$path }$word" ;;
    esac
  done
  case "$path|$prev" in
${choices.join('\n')}
  esac
  if [[ -z "$words" ]]; then
    case "$prev" in
      ${valueOptions(root, nodes).join('|')}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    case "$path" in
${candidates.join('\n')}
    esac
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _nimbus nimbus
`;
}

export function zshScript(root: Command): string {
  const nodes = walk(root);
  const cases = nodes.map(({ path, command }) => {
    // _describe splits "word:description" at the first colon; words have none.
    const entries = [
      ...command.commands.map((child) => `${child.name()}:${child.description()}`),
      ...visibleOptions(command, root).flatMap((option) =>
        [option.long, option.short]
          .filter((w): w is string => !!w)
          .map((word) => `${word}:${option.description}`),
      ),
    ].map(quote);
    return `    ${quote(key(path))}) entries=(${entries.join(' ')}) ;;`;
  });
  return `#compdef nimbus
# nimbus completion for zsh: nimbus completion zsh > ~/.zfunc/_nimbus (a directory in $fpath),
# or source <(nimbus completion zsh)
_nimbus() {
  local path="" word i
  local -a entries
  for ((i = 2; i < CURRENT; i++)); do
    word=\${words[i]}
    case "$word" in
      ${valueOptions(root, nodes).join('|')}) ((i++)); continue ;;
      -*) continue ;;
    esac
    case "\${path:+$path }$word" in
      ${nodes
        .filter(({ path }) => path.length > 0)
        .map(({ path }) => quote(key(path)))
        .join('|')}) path="\${path:+$path }$word" ;;
    esac
  done
  case "$path" in
${cases.join('\n')}
  esac
  _describe 'nimbus' entries
}
if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then _nimbus "$@"; else compdef _nimbus nimbus; fi
`;
}

export function fishScript(root: Command): string {
  const nodes = walk(root);
  const lines = [
    '# nimbus completion for fish: nimbus completion fish > ~/.config/fish/completions/nimbus.fish',
    'complete -c nimbus -f',
  ];
  const fishQuote = (text: string) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  // A condition that holds when exactly `path` has been typed: each word seen, and no child of it yet.
  const condition = (path: string[], command: Command) => {
    const seen = path.map((word) => `__fish_seen_subcommand_from ${word}`);
    const children = command.commands.map((child) => child.name());
    const notYet = children.length > 0 ? [`not __fish_seen_subcommand_from ${children.join(' ')}`] : [];
    const parts = [...(path.length === 0 ? ['__fish_use_subcommand'] : seen), ...notYet];
    return fishQuote(parts.join('; and '));
  };
  for (const { path, command } of nodes) {
    for (const child of command.commands) {
      lines.push(
        `complete -c nimbus -n ${condition(path, command)} -a ${child.name()} -d ${fishQuote(child.description())}`,
      );
    }
    if (path.length === 0) continue;
    for (const option of command.options.filter((candidate) => !candidate.hidden)) {
      const parts = [`complete -c nimbus -n ${condition(path, command)}`];
      if (option.long) parts.push(`-l ${option.long.replace(/^--/, '')}`);
      if (option.short) parts.push(`-s ${option.short.replace(/^-/, '')}`);
      if (option.argChoices) parts.push(`-x -a ${fishQuote(option.argChoices.join(' '))}`);
      else if (option.required || option.optional) parts.push('-r -F');
      parts.push(`-d ${fishQuote(option.description)}`);
      lines.push(parts.join(' '));
    }
  }
  for (const option of root.options) {
    const parts = ['complete -c nimbus'];
    if (option.long) parts.push(`-l ${option.long.replace(/^--/, '')}`);
    if (option.short) parts.push(`-s ${option.short.replace(/^-/, '')}`);
    if (option.argChoices) parts.push(`-x -a ${fishQuote(option.argChoices.join(' '))}`);
    else if (option.required || option.optional) parts.push('-r');
    parts.push(`-d ${fishQuote(option.description)}`);
    lines.push(parts.join(' '));
  }
  return `${lines.join('\n')}\n`;
}

const SCRIPTS = { bash: bashScript, zsh: zshScript, fish: fishScript } as const;

export function completionCommand(root: Command): Command {
  const command = new Command('completion')
    .description('print the shell completion script for bash, zsh or fish')
    .addArgument(new Argument('<shell>', 'the shell').choices(Object.keys(SCRIPTS)));
  example(
    command,
    'source <(nimbus completion bash)                 # in ~/.bashrc',
    'nimbus completion zsh > ~/.zfunc/_nimbus        # a directory in $fpath',
    'nimbus completion fish > ~/.config/fish/completions/nimbus.fish',
  );
  return command.action((shell: keyof typeof SCRIPTS) => {
    process.stdout.write(SCRIPTS[shell](root));
  });
}
