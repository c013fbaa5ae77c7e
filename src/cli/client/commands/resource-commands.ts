/**
 * The commands every resource group has — list, get, create, update, delete — made from what is
 * particular to a group (its paths, columns, options, how its flags make a request body), so the
 * group's file declares only that. Options are added in the order --help lists them: the group's own,
 * then the shared ones (--all, --page…; --idempotency-key; --wait, --timeout).
 */
import type { ListPath, PathsWith } from '@nimbus/sdk';
import { Command, Option } from 'commander';
import { UsageError } from '../exit-codes.js';
import { type Column, printMessage } from '../output.js';
import { type Session, withSession } from '../session.js';
import { type WaitFlags, waitOptions } from '../wait.js';
import {
  example,
  finishAction,
  type JsonBody,
  type ListFlags,
  listOptions,
  type NamedKind,
  printItem,
  resolveId,
  runList,
} from './shared.js';

/** Adds the group's own options to `command`, in the order --help lists them. */
type AddOptions = (command: Command) => Command;

/** The argument naming one resource: its name in the usage line, and its help. */
type Argument = [name: string, help: string];

/** The id an argument names: itself, or for a kind that takes names too, the id of that name. */
function idOf(session: Session, reference: string, named: NamedKind | undefined): Promise<string> | string {
  return named ? resolveId(session, reference, named) : reference;
}

/**
 * A list's filters: each query parameter with the option that sets it (its flags, help and any
 * choices), in the order --help lists them. An option not given sends nothing.
 */
export type ListFilters = Record<string, [flags: string, help: string, choices?: readonly string[]]>;

export interface ListCommandSpec {
  /** The command's name; `list` (the default) also answers to `ls`. */
  name?: string;
  description: string;
  /** The parent's id, for a list under a parent resource. */
  argument?: Argument;
  filters?: ListFilters;
  sorts: readonly string[];
  examples: string[];
  columns: Column[];
  /** The list's path or, under a parent, the path and its parameters from the arguments. */
  path: ListPath | ((args: string[]) => { path: ListPath; params?: Record<string, string> });
}

/** `<group> list|ls`: the filters as options, one page or --all, printed as a table or data. */
export function listCommand(spec: ListCommandSpec): Command {
  const name = spec.name ?? 'list';
  const command = new Command(name);
  if (name === 'list') command.alias('ls');
  command.description(spec.description);
  if (spec.argument) command.argument(...spec.argument);
  const filters = Object.entries(spec.filters ?? {}).map(([query, [flags, help, choices]]) => {
    const option = new Option(flags, help);
    if (choices) option.choices(choices);
    command.addOption(option);
    return { query, option: option.attributeName() };
  });
  listOptions(command, spec.sorts);
  example(command, ...spec.examples);
  return command.action(
    withSession<ListFlags & Record<string, unknown>>((session, args, flags) => {
      const at = typeof spec.path === 'function' ? spec.path(args) : { path: spec.path };
      const query = Object.fromEntries(filters.map((filter) => [filter.query, flags[filter.option]]));
      const request = at.params ? { path: at.params, query } : { query };
      return runList(session, at.path, request, spec.columns, flags);
    }),
  );
}

export interface GetCommandSpec {
  /** The command's name (default `get`). */
  name?: string;
  description: string;
  argument: Argument;
  examples: string[];
  path: PathsWith<'get'>;
  /** Set where the argument may be a name. */
  named?: NamedKind;
}

/** `<group> get <id>`: one resource, every field. */
export function getCommand(spec: GetCommandSpec): Command {
  const command = new Command(spec.name ?? 'get').description(spec.description).argument(...spec.argument);
  example(command, ...spec.examples);
  return command.action(
    withSession(async (session, [reference]) => {
      const id = await idOf(session, reference!, spec.named);
      // The path comes from the group's definition; the SDK's per-path types cannot follow a path
      // chosen at run time, hence the casts (as in runList).
      const answer = await session.nimbus.get(spec.path, { params: { path: { id } } } as never);
      printItem(session, (answer as unknown as { data: unknown }).data);
    }),
  );
}

export interface CreateCommandSpec<P extends PathsWith<'post'>, F> {
  /** The command's name (default `create`). */
  name?: string;
  description: string;
  /** Usually the new resource's name. */
  argument?: Argument;
  options: AddOptions;
  examples: string[];
  path: P;
  /** The request body from the options and arguments; throws a UsageError for a bad combination. */
  body(flags: F, session: Session, args: string[]): JsonBody<P, 'post'> | Promise<JsonBody<P, 'post'>>;
  /**
   * For a create answered 202 with the resource on its way: the --wait options, which follow it to
   * `until` (the help's words), or to what `target` makes of the body sent.
   */
  wait?: { until: string; target?: (body: JsonBody<P, 'post'>) => string };
  /** Offers --idempotency-key, whose help says the same key never makes a second `idempotent`. */
  idempotent?: string;
  /** Written to stderr after a table (a secret the answer shows once). */
  notice?: string;
}

/** `<group> create <name>`: a body from the options, an optional Idempotency-Key, then --wait or the answer. */
export function createCommand<P extends PathsWith<'post'>, F>(spec: CreateCommandSpec<P, F>): Command {
  const command = new Command(spec.name ?? 'create').description(spec.description);
  if (spec.argument) command.argument(...spec.argument);
  spec.options(command);
  if (spec.idempotent) {
    command.option(
      '--idempotency-key <key>',
      `make the create safe to repeat: the same key never makes a second ${spec.idempotent}`,
    );
  }
  if (spec.wait) for (const option of waitOptions(spec.wait.until)) command.addOption(option);
  example(command, ...spec.examples);
  return command.action(
    withSession<F & WaitFlags & { idempotencyKey?: string }>(async (session, args, flags) => {
      const body = await spec.body(flags, session, args);
      const headers = flags.idempotencyKey ? { 'idempotency-key': flags.idempotencyKey } : undefined;
      // As in getCommand: a path chosen at run time, hence the casts.
      const { data } = (await session.nimbus.post(spec.path, {
        body,
        ...(headers ? { headers } : {}),
      } as never)) as { data: { id: string; status: string } };
      if (spec.wait) {
        await finishAction(session, data, spec.wait.target?.(body) ?? spec.wait.until, flags);
        return;
      }
      printItem(session, data);
      if (spec.notice && session.humanOutput) process.stderr.write(`${spec.notice}\n`);
    }),
  );
}

const NOTHING_TO_UPDATE = 'Nothing to update: give at least one option (see --help)';

export interface UpdateCommandSpec<P extends PathsWith<'patch'>, F> {
  description: string;
  /** The resource to change; none for a singleton such as the account. */
  argument?: Argument;
  options: AddOptions;
  examples: string[];
  path: P;
  /** Set where the argument may be a name. */
  named?: NamedKind;
  /** The changes the options ask for (the argument as given, unresolved); throws a UsageError for a bad combination. */
  body(flags: F, session: Session, reference: string): JsonBody<P, 'patch'> | Promise<JsonBody<P, 'patch'>>;
  /** What the UsageError says when no option asks for a change. */
  nothing?: string;
}

/** `<group> update <id>`: the changes the options ask for (at least one), then the resource as it is now. */
export function updateCommand<P extends PathsWith<'patch'>, F>(spec: UpdateCommandSpec<P, F>): Command {
  const command = new Command('update').description(spec.description);
  if (spec.argument) command.argument(...spec.argument);
  spec.options(command);
  example(command, ...spec.examples);
  return command.action(
    withSession<F>(async (session, [reference], flags) => {
      const body = await spec.body(flags, session, reference!);
      if (Object.keys(body).length === 0) throw new UsageError(spec.nothing ?? NOTHING_TO_UPDATE);
      // Resolved only once there is something to send: a usage mistake costs no request.
      const params = spec.argument
        ? { path: { id: await idOf(session, reference!, spec.named) } }
        : undefined;
      // As in getCommand: a path chosen at run time, hence the casts.
      const { data } = (await session.nimbus.patch(spec.path, {
        ...(params ? { params } : {}),
        body,
      } as never)) as { data: unknown };
      printItem(session, data);
    }),
  );
}

export interface DeleteCommandSpec {
  description: string;
  /** The argument's name and help, e.g. `['<id>', 'rule id']`. */
  argument: Argument;
  example: string;
  path: PathsWith<'delete'>;
  /**
   * How the API deletes: 'now' (204; prints "Deleted <noun> <id>") or 'async' (202 with the resource
   * deleting; --wait follows it until it is gone).
   */
  mode: { now: string } | 'async';
  /** Set where the argument may be a name. */
  named?: NamedKind;
}

/** `<group> delete|rm <id>`: the same command in every group, apart from its words and path. */
export function deleteCommand(spec: DeleteCommandSpec): Command {
  const command = new Command('delete')
    .alias('rm')
    .description(spec.description)
    .argument(...spec.argument);
  if (spec.mode === 'async') for (const option of waitOptions('deleted')) command.addOption(option);
  example(command, spec.example);
  return command.action(
    withSession<WaitFlags>(async (session, [reference], flags) => {
      const id = await idOf(session, reference!, spec.named);
      // As in getCommand: a path chosen at run time, hence the cast.
      const answer = (await session.nimbus.delete(spec.path, { params: { path: { id } } } as never)) as {
        data?: { id: string; status: string };
      };
      if (spec.mode === 'async') await finishAction(session, answer.data!, 'deleted', flags);
      else printMessage(`Deleted ${spec.mode.now} ${id}`, session.out);
    }),
  );
}

/**
 * How a group's commands name one of its resources: by id, where `get`'s help also shows the id's
 * prefix (`policy id (alr_…)`) so one look tells what an id looks like; or by id or name.
 */
export type ResourceId = { help: string; prefix?: string } | { argument: string; named: NamedKind };

/** One action on a resource: a request for it, then the answer, or with --wait the resource once there. */
export interface ActionCommandSpec<F, A> {
  name: string;
  description: string;
  /** The group's own options, before --wait and --timeout. */
  options?: AddOptions;
  examples: string[];
  /** Sends the action for the resource `id`, and gives the API's answer. */
  send(session: Session, id: string, flags: F): Promise<A>;
  /**
   * For an action answered 202 with the resource on its way: --wait follows it to `until` (the help's
   * words), or to what `target` makes of the answer.
   */
  wait?: { until: string; target?: (answer: A) => string };
}

/** The paths of collections whose resources each have a path of their own, `<collection>/{id}`. */
type Collection = { [P in PathsWith<'get'>]: P extends `${infer C}/{id}` ? C : never }[PathsWith<'get'>];
type ItemPath<C extends Collection> = `${C}/{id}` & PathsWith<'get'>;

/**
 * The commands of a group whose resources sit at `path` (the list, and where they are created) and
 * `path/{id}`: each builder above with the paths, the columns and the resource's argument filled in, so
 * the group names them once.
 */
export function resourceCommands<C extends ListPath & Collection>(resource: {
  path: C;
  id: ResourceId;
  columns: Column[];
}) {
  type I = ItemPath<C>;
  const item = `${resource.path}/{id}` as I;
  const named = 'named' in resource.id ? resource.id.named : undefined;
  const argument: Argument =
    'named' in resource.id ? [resource.id.argument, 'id or name'] : ['<id>', resource.id.help];
  const shown: Argument =
    'prefix' in resource.id && resource.id.prefix
      ? ['<id>', `${resource.id.help} (${resource.id.prefix}…)`]
      : argument;
  return {
    /** The argument naming one resource, for the group's own commands. */
    argument,
    create: <F>(spec: Omit<CreateCommandSpec<C & PathsWith<'post'>, F>, 'path'>) =>
      createCommand({ ...spec, path: resource.path as C & PathsWith<'post'> }),
    list: (spec: Omit<ListCommandSpec, 'path' | 'columns'>) =>
      listCommand({ ...spec, columns: resource.columns, path: resource.path }),
    get: (spec: Omit<GetCommandSpec, 'path' | 'argument' | 'named'>) =>
      getCommand({ ...spec, argument: shown, path: item, named }),
    update: <F>(spec: Omit<UpdateCommandSpec<I & PathsWith<'patch'>, F>, 'path' | 'argument' | 'named'>) =>
      updateCommand({ ...spec, argument, path: item as I & PathsWith<'patch'>, named }),
    delete: (spec: Omit<DeleteCommandSpec, 'path' | 'argument' | 'named'>) =>
      deleteCommand({ ...spec, argument, path: item as I & PathsWith<'delete'>, named }),
    action: <F, A>(spec: ActionCommandSpec<F, A>) => actionCommand(spec, argument, named),
  };
}

/** `<group> <action> <id>`: see ActionCommandSpec. */
function actionCommand<F, A>(spec: ActionCommandSpec<F, A>, argument: Argument, named?: NamedKind): Command {
  const command = new Command(spec.name).description(spec.description).argument(...argument);
  spec.options?.(command);
  const wait = spec.wait;
  if (wait) for (const option of waitOptions(wait.until)) command.addOption(option);
  example(command, ...spec.examples);
  return command.action(
    withSession<F & WaitFlags>(async (session, [reference], flags) => {
      const answer = await spec.send(session, await idOf(session, reference!, named), flags);
      if (!wait) {
        printItem(session, answer);
        return;
      }
      // An action that takes --wait is answered with the resource in its transitional status.
      const resource = answer as A & { id: string; status: string };
      await finishAction(session, resource, wait.target?.(answer) ?? wait.until, flags);
    }),
  );
}
