/** `nimbus keys …`: the account's API keys (the value is shown once, when the key is created). */
import { Command } from 'commander';
import type { Column } from '../output.js';
import { createCommand, deleteCommand, getCommand, listCommand } from './resource-commands.js';
import { collect, defined, example, type Permission } from './shared.js';

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

  const create = createCommand({
    description: 'create an API key; its value is shown this once',
    argument: ['<name>', 'a name saying what the key is for'],
    options: (command) =>
      command
        .option(
          '--permission <permission>',
          'e.g. instances:read, volumes:write or * (repeatable; default: every permission you hold)',
          collect,
        )
        .option('--expires <time>', 'expiry, ISO 8601 (e.g. 2027-01-01T00:00:00Z)'),
    examples: [
      'nimbus keys create read-only --permission account:read --permission billing:read',
      'nimbus keys create ci -o json | jq -r .key',
    ],
    path: '/v1/account/api-keys',
    body: (flags: { permission?: string[]; expires?: string }, _session, [name]) => ({
      name: name!,
      ...defined({ permissions: flags.permission as Permission[] | undefined, expires_at: flags.expires }),
    }),
    notice: 'Store the key now: it is not shown again.',
  });

  const list = listCommand({
    description: 'list API keys (never their values)',
    sorts: ['created_at', 'name', 'last_used_at'],
    examples: ['nimbus keys list -o wide'],
    columns: COLUMNS,
    path: '/v1/account/api-keys',
  });

  const get = getCommand({
    description: 'show one API key',
    argument: ['<id>', 'key id (key_…)'],
    examples: ['nimbus keys get key_0123'],
    path: '/v1/account/api-keys/{id}',
  });

  const remove = deleteCommand({
    description: 'revoke an API key at once',
    argument: ['<id>', 'key id (key_…)'],
    example: 'nimbus keys delete key_0123',
    path: '/v1/account/api-keys/{id}',
    mode: { now: 'API key' },
  });
  return group.addCommand(create).addCommand(list).addCommand(get).addCommand(remove);
}
