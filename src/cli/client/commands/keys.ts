/** `nimbus keys …`: the account's API keys (the value is shown once, when the key is created). */
import { Command } from 'commander';
import type { Column } from '../output.js';
import { resourceCommands } from './resource-commands.js';
import { addCommands, collect, defined, example, type Permission } from './shared.js';

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

  const keys = resourceCommands({
    path: '/v1/account/api-keys',
    // Every command's help shows the id's prefix, delete included: a key's value has a prefix too
    // (PREFIX), and that is not the id.
    id: { help: 'key id (key_…)' },
    columns: COLUMNS,
  });

  const create = keys.create({
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
    body: (flags: { permission?: string[]; expires?: string }, _session, [name]) => ({
      name: name!,
      ...defined({ permissions: flags.permission as Permission[] | undefined, expires_at: flags.expires }),
    }),
    notice: 'Store the key now: it is not shown again.',
  });

  const list = keys.list({
    description: 'list API keys (never their values)',
    sorts: ['created_at', 'name', 'last_used_at'],
    examples: ['nimbus keys list -o wide'],
  });
  const get = keys.get({ description: 'show one API key', examples: ['nimbus keys get key_0123'] });
  const remove = keys.delete({
    description: 'revoke an API key at once',
    example: 'nimbus keys delete key_0123',
    mode: { now: 'API key' },
  });
  return addCommands(group, create, list, get, remove);
}
