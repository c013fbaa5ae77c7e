/**
 * Pieces every command group uses: help examples, list options (one page or `--all`), repeatable
 * options, `key=value` tags, printing one resource or a list, and accepting a name where an id is asked.
 */
import type { ListPath, paths } from '@nimbus/sdk';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { UsageError } from '../exit-codes.js';
import { type Column, printList, printMessage, printOne } from '../output.js';
import type { Session } from '../session.js';
import { type WaitFlags, waitForStatus } from '../wait.js';

/** The JSON body a POST or PATCH of `P` takes. */
export type JsonBody<P extends keyof paths, M extends 'post' | 'patch'> = paths[P] extends {
  [method in M]: { requestBody?: { content: { 'application/json': infer B } } };
}
  ? NonNullable<B>
  : never;
type CreateBody<P extends keyof paths> = JsonBody<P, 'post'>;
/*
 * The API's enumerations. Values typed by the user are passed on as they are and the server, which
 * validates every field and names the allowed values in its 400, is the one judge; these types only let
 * such strings into the typed request bodies.
 */
export type Region = CreateBody<'/v1/instances'>['region'];
export type InstanceType = CreateBody<'/v1/instances'>['instance_type'];
export type Image = CreateBody<'/v1/instances'>['image'];
export type Permission = NonNullable<CreateBody<'/v1/account/api-keys'>['permissions']>[number];

/** Adds an "Examples" block to the command's --help (every command has one). */
export function example(command: Command, ...lines: string[]): Command {
  return command.addHelpText('after', `\nExamples:\n${lines.map((line) => `  $ ${line}`).join('\n')}\n`);
}

/** For repeatable options: `--tag a=1 --tag b=2` collects ['a=1', 'b=2']. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** `['env=prod', 'team=web']` as `{env: 'prod', team: 'web'}`. */
export function parseTags(
  values: string[] | undefined,
  option = '--tag',
): Record<string, string> | undefined {
  if (values === undefined) return undefined;
  const tags: Record<string, string> = {};
  for (const value of values) {
    const at = value.indexOf('=');
    if (at <= 0) throw new UsageError(`${option} ${value}: expected key=value`);
    tags[value.slice(0, at)] = value.slice(at + 1);
  }
  return tags;
}

/** An option parser for whole numbers; commander reports a bad value as a usage error. */
export function integer(value: string): number {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError('expected a whole number');
  return Number(value);
}

export interface ListFlags {
  all?: boolean;
  page?: number;
  limit?: number;
  sort?: string;
  order?: string;
}

/** --all, --page, --limit, --sort (one of `sorts`) and --order on a list command. */
export function listOptions(command: Command, sorts: readonly string[]): Command {
  return command
    .option('--all', 'follow every page (the API gives at most 100 items a page)')
    .option('--page <n>', 'page number, from 1', integer)
    .option('--limit <n>', 'items per page, 1-100 (default 20)', integer)
    .addOption(new Option('--sort <field>', 'sort by').choices(sorts))
    .addOption(new Option('--order <order>', 'sort order').choices(['asc', 'desc']));
}

/** Drops undefined values, so only the filters given reach the query string. */
export function defined<T extends Record<string, unknown>>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/**
 * `--protect` / `--no-protect`: deletion protection on create and update (docs/api.md, Deletion
 * protection). Neither given: nothing sent, so the server's default (off) or the current value stays.
 */
export function protectOptions(command: Command): Command {
  return command
    .option('--protect', 'turn deletion protection on (deletes are refused until it is off)')
    .option('--no-protect', 'turn deletion protection off');
}

/** The body's `protection` for the --protect / --no-protect flags; undefined when neither was given. */
export function protectionChange(protect: boolean | undefined): { delete: boolean } | undefined {
  return protect === undefined ? undefined : { delete: protect };
}

/** The PROTECTED column of the three resources that have deletion protection. */
export const PROTECTED_COLUMN: Column = {
  header: 'PROTECTED',
  value: (item) => (item.protection as { delete?: boolean } | undefined)?.delete ?? false,
  wide: true,
};

type Item = Record<string, unknown>;

/**
 * Prints one page (the one asked for, else the first) or, with --all, every item of every page. On a
 * table a note on stderr says when more pages exist.
 */
export async function runList(
  session: Session,
  path: ListPath,
  request: { path?: Record<string, string>; query?: Record<string, unknown> },
  columns: Column[],
  flags: ListFlags,
): Promise<void> {
  const query = {
    ...defined(request.query ?? {}),
    ...defined({ sort: flags.sort, order: flags.order, limit: flags.limit }),
  };
  const params = { ...(request.path ? { path: request.path } : {}), query };
  // The paths and their parameters come from the command definitions, which name real list paths; the
  // SDK's per-path types cannot follow a path chosen at run time, hence the casts.
  if (flags.all) {
    const items: Item[] = [];
    for await (const item of session.nimbus.paginate(path, { params } as never)) items.push(item as Item);
    printList(items, columns, session.out);
    return;
  }
  const page = flags.page ?? 1;
  const body = (await session.nimbus.get(path, {
    params: { ...params, query: { ...query, page } },
  } as never)) as {
    data: Item[];
    pagination: { total_items: number; total_pages: number; has_next: boolean };
  };
  printList(body.data, columns, session.out);
  if (body.pagination.has_next && session.humanOutput) {
    process.stderr.write(
      `Page ${page} of ${body.pagination.total_pages} (${body.pagination.total_items} items): --page ${page + 1} for the next, --all for all\n`,
    );
  }
}

export function printItem(session: Session, item: unknown): void {
  printOne(item as Item, session.out);
}

/**
 * The id for `reference`: itself when it has the resource's id prefix, else the one resource of that
 * name (a list filtered by name), so `nimbus instances get web-1` works as well as the id.
 */
export async function resolveId(
  session: Session,
  reference: string,
  kind: {
    prefix: string;
    path: '/v1/instances' | '/v1/volumes' | '/v1/ssh-keys' | '/v1/public-ips';
    noun: string;
  },
): Promise<string> {
  if (reference.startsWith(kind.prefix)) return reference;
  const body = (await session.nimbus.get(kind.path, {
    params: { query: { name: reference, limit: 2 } },
  })) as {
    data: { id: string; name: string }[];
  };
  const matches = body.data.filter((item) => item.name === reference);
  if (matches.length === 1) return matches[0]!.id;
  if (matches.length === 0) {
    // Let the API answer: its 404 (exit 4) names what is missing the same way for ids and names.
    return reference;
  }
  throw new UsageError(`More than one ${kind.noun} is named "${reference}"; use its id`);
}

/**
 * After an asynchronous action (answered 202 with the resource in its transitional status): with --wait,
 * follows it to `target` and prints it as it then is; without, prints the answer at once.
 */
export async function finishAction(
  session: Session,
  resource: { id: string; status: string },
  target: string,
  flags: WaitFlags,
): Promise<void> {
  if (!flags.wait) {
    printItem(session, resource);
    return;
  }
  const final = await waitForStatus(session, resource.id, target, flags);
  if (target === 'deleted') printMessage(`${resource.id} deleted`, session.out);
  else printItem(session, final);
}

/** A resource kind whose commands take a name as well as an id (resolveId). */
export type NamedKind = Parameters<typeof resolveId>[2];

/** Adds `commands` to `group`, in the order --help lists them. */
export function addCommands(group: Command, ...commands: Command[]): Command {
  for (const command of commands) group.addCommand(command);
  return group;
}
