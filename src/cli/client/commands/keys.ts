/** `nimbus keys …`: the account's API keys (the value is shown once, when the key is created). */
import { Command } from 'commander';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import {
  collect,
  defined,
  deleteCommand,
  example,
  type ListFlags,
  listOptions,
  type Permission,
  printItem,
  runList,
} from './shared.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (k) => k.id },
  { header: 'NAME', value: (k) => k.name },
  { header: 'PREFIX', value: (k) => k.prefix },
  { header: 'PERMISSIONS', value: (k) => k.permissions },
  { header: 'EXPIRES', value: (k) => k.expires_at },
  { header: 'LAST USED', value: (k) => k.last_used_at, wide: true },
  { header: 'CREATED', value: (k) => k.created_at, wide: true },
];

export function keysCommand(): Command {
  const group = new Command('keys').alias('api-keys').description('API keys of the account');
  example(group, 'nimbus keys list', 'nimbus keys create ci --permission instances:write');

  const create = new Command('create')
    .description('create an API key; its value is shown this once')
    .argument('<name>', 'a name saying what the key is for')
    .option(
      '--permission <permission>',
      'e.g. instances:read, volumes:write or * (repeatable; default: every permission you hold)',
      collect,
    )
    .option('--expires <time>', 'expiry, ISO 8601 (e.g. 2027-01-01T00:00:00Z)');
  example(
    create,
    'nimbus keys create read-only --permission account:read --permission billing:read',
    'nimbus keys create ci -o json | jq -r .key',
  );
  create.action(
    withSession<{ permission?: string[]; expires?: string }>(async (session, [name], flags) => {
      const body = {
        name: name!,
        ...defined({ permissions: flags.permission as Permission[] | undefined, expires_at: flags.expires }),
      };
      const { data } = await session.nimbus.post('/v1/account/api-keys', { body });
      printItem(session, data);
      if (session.humanOutput) process.stderr.write('Store the key now: it is not shown again.\n');
    }),
  );

  const list = listOptions(
    new Command('list').alias('ls').description('list API keys (never their values)'),
    ['created_at', 'name', 'last_used_at'],
  );
  example(list, 'nimbus keys list -o wide');
  list.action(
    withSession<ListFlags>((session, _args, flags) =>
      runList(session, '/v1/account/api-keys', {}, COLUMNS, flags),
    ),
  );

  const get = new Command('get').description('show one API key').argument('<id>', 'key id (key_…)');
  example(get, 'nimbus keys get key_0123');
  get.action(
    withSession(async (session, [id]) => {
      printItem(
        session,
        (await session.nimbus.get('/v1/account/api-keys/{id}', { params: { path: { id: id! } } })).data,
      );
    }),
  );

  const remove = deleteCommand({
    description: 'revoke an API key at once',
    argument: ['<id>', 'key id (key_…)'],
    example: 'nimbus keys delete key_0123',
    path: '/v1/account/api-keys/{id}',
    mode: { now: 'API key' },
  });
  return group.addCommand(create).addCommand(list).addCommand(get).addCommand(remove);
}
