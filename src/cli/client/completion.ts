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

/** `--output` and `-o`, or whichever of the two the option has. */
function flagsOf(option: Option): string[] {
  return [option.long, option.short].filter((w): w is string => !!w);
}

function optionWords(command: Command, root: Command): string[] {
  return [...visibleOptions(command, root).flatMap(flagsOf), '--help'];
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

/**
 * How bash and zsh share their scripts: the same `case` tables, each setting what the script offers its
 * own way (bash: a string of words; zsh: an array of entries).
 */
type Offer = (words: readonly string[]) => string;

/** `'instances create'|…) <offer> ;;` for each command in `nodes`, offering what `wordsOf` gives. */
function commandCases(nodes: Node[], indent: string, wordsOf: (command: Command) => string[], offer: Offer) {
  return nodes.map(({ path, command }) => `${indent}${quote(key(path))}) ${offer(wordsOf(command))} ;;`);
}

/** The commands that have subcommands: a word that is not an option offers those alone. */
const withSubcommands = (nodes: Node[]) => nodes.filter(({ command }) => command.commands.length > 0);

/** `'instances list|--status'|…) <offer> ;;`: an option's choices after the option. */
function choiceCases(root: Command, nodes: Node[], offer: Offer): string[] {
  return nodes.flatMap(({ path, command }) =>
    visibleOptions(command, root)
      .filter((option) => option.argChoices)
      .map((option) => {
        const cases = flagsOf(option)
          .map((flag) => quote(`${key(path)}|${flag}`))
          .join('|');
        return `    ${cases}) ${offer(option.argChoices!)} ;;`;
      }),
  );
}

/** `'completion|0') <offer> ;;`: the choices of the n-th positional argument. */
function positionalCases(nodes: Node[], offer: Offer): string[] {
  return nodes.flatMap(({ path, command }) =>
    argumentChoices(command).map(
      ({ index, choices }) => `      ${quote(`${key(path)}|${index}`)}) ${offer(choices)} ;;`,
    ),
  );
}

/**
 * The body of the loop over the words typed so far: a value option skips its value, another option is
 * passed over, a word that extends the command path (kept in `variable`) extends it, any other is a
 * positional argument (counted in `args`).
 */
function readWord(root: Command, nodes: Node[], variable: string): string {
  const paths = nodes
    .filter(({ path }) => path.length > 0)
    .map(({ path }) => quote(key(path)))
    .join('|');
  return `    case "$word" in
      ${valueOptions(root, nodes).join('|')}) ((i++)); continue ;;
      -*) continue ;;
    esac
    case "\${${variable}:+$${variable} }$word" in
      ${paths}) ${variable}="\${${variable}:+$${variable} }$word" ;;
      *) ((args++)) ;;
    esac`;
}

export function bashScript(root: Command): string {
  const nodes = walk(root);
  const offer: Offer = (words) => `words=${quote(words.join(' '))}`;
  const names = (command: Command) => command.commands.map((child) => child.name());
  const candidates = commandCases(
    nodes,
    '    ',
    (command) => [...names(command), ...optionWords(command, root)],
    offer,
  );
  return `# nimbus completion for bash: source <(nimbus completion bash), or save it in
# /etc/bash_completion.d/nimbus
_nimbus() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} path="" word words="" i args=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=\${COMP_WORDS[i]}
${readWord(root, nodes, 'path')}
  done
  case "$path|$prev" in
${choiceCases(root, nodes, offer).join('\n')}
  esac
  if [[ -z "$words" && "$cur" != -* ]]; then
    case "$path|$args" in
${positionalCases(nodes, offer).join('\n')}
    esac
    case "$path" in
${commandCases(withSubcommands(nodes), '      ', names, offer).join('\n')}
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
  const offer: Offer = (entries) => `entries=(${entries.map(quote).join(' ')})`;
  // _describe splits "word:description" at the first colon not escaped; words have none.
  const described = (word: string, description: string) => `${word.replace(/:/g, '\\:')}:${description}`;
  const subcommandEntries = (command: Command) =>
    command.commands.map((child) => described(child.name(), child.description()));
  const entries = (command: Command) => [
    ...subcommandEntries(command),
    ...visibleOptions(command, root).flatMap((option) =>
      flagsOf(option).map((word) => described(word, option.description)),
    ),
  ];
  // Not "path": in zsh that name is the array tied to PATH.
  return `#compdef nimbus
# nimbus completion for zsh: nimbus completion zsh > ~/.zfunc/_nimbus (a directory in $fpath),
# or source <(nimbus completion zsh)
_nimbus() {
  local cmdpath="" word i args=0 prev=\${words[CURRENT-1]}
  local -a entries
  for ((i = 2; i < CURRENT; i++)); do
    word=\${words[i]}
${readWord(root, nodes, 'cmdpath')}
  done
  case "$cmdpath|$prev" in
${choiceCases(root, nodes, offer).join('\n')}
  esac
  if (( \${#entries} == 0 )); then
    case "$prev" in
      ${valueOptions(root, nodes).join('|')}) _files; return ;;
    esac
    if [[ "\${words[CURRENT]}" != -* ]]; then
      case "$cmdpath|$args" in
${positionalCases(nodes, offer).join('\n')}
      esac
      if (( \${#entries} == 0 )); then
        case "$cmdpath" in
${commandCases(withSubcommands(nodes), '      ', subcommandEntries, offer).join('\n')}
        esac
      fi
    fi
  fi
  if (( \${#entries} == 0 )); then
    case "$cmdpath" in
${commandCases(nodes, '    ', entries, offer).join('\n')}
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
  /** `complete` for one option: its flags, then its choices, or `valueFlags` when it takes any value. */
  const optionLine = (head: string, option: Option, valueFlags: string) => {
    const parts = [head];
    if (option.long) parts.push(`-l ${option.long.replace(/^--/, '')}`);
    if (option.short) parts.push(`-s ${option.short.replace(/^-/, '')}`);
    if (option.argChoices) parts.push(`-x -a ${fishQuote(option.argChoices.join(' '))}`);
    else if (option.required || option.optional) parts.push(valueFlags);
    parts.push(`-d ${fishQuote(option.description)}`);
    return parts.join(' ');
  };
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
      lines.push(optionLine(`complete -c nimbus -n ${condition(path, command)}`, option, '-r -F'));
    }
  }
  for (const option of root.options) lines.push(optionLine('complete -c nimbus', option, '-r'));
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
