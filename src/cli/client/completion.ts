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

/** Choices of positional arguments: `nimbus completion <shell>` offers bash, zsh and fish. */
function argumentChoices(command: Command): { index: number; choices: readonly string[] }[] {
  return command.registeredArguments.flatMap((argument, index) =>
    argument.argChoices ? [{ index, choices: argument.argChoices }] : [],
  );
}

export function bashScript(root: Command): string {
  const nodes = walk(root);
  const paths = nodes
    .filter(({ path }) => path.length > 0)
    .map(({ path }) => quote(key(path)))
    .join('|');
  const candidates = nodes.map(({ path, command }) => {
    const words = [...command.commands.map((child) => child.name()), ...optionWords(command, root)];
    return `    ${quote(key(path))}) words=${quote(words.join(' '))} ;;`;
  });
  // A word that is not an option offers the subcommands alone where there are some.
  const subcommands = nodes
    .filter(({ command }) => command.commands.length > 0)
    .map(
      ({ path, command }) =>
        `      ${quote(key(path))}) words=${quote(command.commands.map((child) => child.name()).join(' '))} ;;`,
    );
  const choices = nodes.flatMap(({ path, command }) =>
    visibleOptions(command, root)
      .filter((option) => option.argChoices)
      .map((option) => {
        const flags = [option.long, option.short].filter((w): w is string => !!w);
        const cases = flags.map((flag) => quote(`${key(path)}|${flag}`)).join('|');
        return `    ${cases}) words=${quote(option.argChoices!.join(' '))} ;;`;
      }),
  );
  const positional = nodes.flatMap(({ path, command }) =>
    argumentChoices(command).map(
      ({ index, choices: words }) =>
        `      ${quote(`${key(path)}|${index}`)}) words=${quote(words.join(' '))} ;;`,
    ),
  );
  return `# nimbus completion for bash: source <(nimbus completion bash), or save it in
# /etc/bash_completion.d/nimbus
_nimbus() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} path="" word words="" i args=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=\${COMP_WORDS[i]}
    case "$word" in
      ${valueOptions(root, nodes).join('|')}) ((i++)); continue ;;
      -*) continue ;;
    esac
    case "\${path:+$path }$word" in
      ${paths}) path="\${path:+$path }$word" ;;
      *) ((args++)) ;;
    esac
  done
  case "$path|$prev" in
${choices.join('\n')}
  esac
  if [[ -z "$words" && "$cur" != -* ]]; then
    case "$path|$args" in
${positional.join('\n')}
    esac
    case "$path" in
${subcommands.join('\n')}
    esac
  fi
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
  // _describe splits "word:description" at the first colon not escaped; words have none.
  const described = (word: string, description: string) =>
    quote(`${word.replace(/:/g, '\\:')}:${description}`);
  const subcommandEntries = (command: Command) =>
    command.commands.map((child) => described(child.name(), child.description()));
  const cases = nodes.map(({ path, command }) => {
    const entries = [
      ...subcommandEntries(command),
      ...visibleOptions(command, root).flatMap((option) =>
        [option.long, option.short]
          .filter((w): w is string => !!w)
          .map((word) => described(word, option.description)),
      ),
    ];
    return `    ${quote(key(path))}) entries=(${entries.join(' ')}) ;;`;
  });
  const subcommands = nodes
    .filter(({ command }) => command.commands.length > 0)
    .map(
      ({ path, command }) =>
        `      ${quote(key(path))}) entries=(${subcommandEntries(command).join(' ')}) ;;`,
    );
  const choices = nodes.flatMap(({ path, command }) =>
    visibleOptions(command, root)
      .filter((option) => option.argChoices)
      .map((option) => {
        const flags = [option.long, option.short].filter((w): w is string => !!w);
        const cases = flags.map((flag) => quote(`${key(path)}|${flag}`)).join('|');
        return `    ${cases}) entries=(${option.argChoices!.map(quote).join(' ')}) ;;`;
      }),
  );
  const positional = nodes.flatMap(({ path, command }) =>
    argumentChoices(command).map(
      ({ index, choices: words }) =>
        `      ${quote(`${key(path)}|${index}`)}) entries=(${words.map(quote).join(' ')}) ;;`,
    ),
  );
  // Not "path": in zsh that name is the array tied to PATH.
  return `#compdef nimbus
# nimbus completion for zsh: nimbus completion zsh > ~/.zfunc/_nimbus (a directory in $fpath),
# or source <(nimbus completion zsh)
_nimbus() {
  local cmdpath="" word i args=0 prev=\${words[CURRENT-1]}
  local -a entries
  for ((i = 2; i < CURRENT; i++)); do
    word=\${words[i]}
    case "$word" in
      ${valueOptions(root, nodes).join('|')}) ((i++)); continue ;;
      -*) continue ;;
    esac
    case "\${cmdpath:+$cmdpath }$word" in
      ${nodes
        .filter(({ path }) => path.length > 0)
        .map(({ path }) => quote(key(path)))
        .join('|')}) cmdpath="\${cmdpath:+$cmdpath }$word" ;;
      *) ((args++)) ;;
    esac
  done
  case "$cmdpath|$prev" in
${choices.join('\n')}
  esac
  if (( \${#entries} == 0 )); then
    case "$prev" in
      ${valueOptions(root, nodes).join('|')}) _files; return ;;
    esac
    if [[ "\${words[CURRENT]}" != -* ]]; then
      case "$cmdpath|$args" in
${positional.join('\n')}
      esac
      if (( \${#entries} == 0 )); then
        case "$cmdpath" in
${subcommands.join('\n')}
        esac
      fi
    fi
  fi
  if (( \${#entries} == 0 )); then
    case "$cmdpath" in
${cases.join('\n')}
    esac
  fi
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
    // At the top, fish's own test says "no command yet"; deeper, each word seen and no child of it yet.
    const parts = path.length === 0 ? ['__fish_use_subcommand'] : [...seen, ...notYet];
    return fishQuote(parts.join('; and '));
  };
  for (const { path, command } of nodes) {
    for (const child of command.commands) {
      lines.push(
        `complete -c nimbus -n ${condition(path, command)} -a ${child.name()} -d ${fishQuote(child.description())}`,
      );
    }
    for (const { choices } of argumentChoices(command)) {
      lines.push(`complete -c nimbus -n ${condition(path, command)} -a ${fishQuote(choices.join(' '))}`);
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
