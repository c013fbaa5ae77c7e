/** `nimbus ssh-keys …`: the account's SSH public keys, which instances are created with. */
import { Command } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import { resourceCommands } from './resource-commands.js';
import { addCommands, example } from './shared.js';
import { readPublicKeyFile } from './ssh-key-files.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (k) => k.id },
  { header: 'NAME', value: (k) => k.name },
  { header: 'FINGERPRINT', value: (k) => k.fingerprint },
  { header: 'CREATED', value: (k) => k.created_at },
  { header: 'PUBLIC KEY', value: (k) => k.public_key, wide: true },
];
const SSH_KEY = { prefix: 'sshk_', path: '/v1/ssh-keys', noun: 'SSH key' } as const;

export function sshKeysCommand(): Command {
  const group = new Command('ssh-keys')
    .alias('ssh-key')
    .description('SSH public keys for logging in to instances');
  example(group, 'nimbus ssh-keys add --file ~/.ssh/id_ed25519.pub', 'nimbus ssh-keys list');

  const keys = resourceCommands({
    path: '/v1/ssh-keys',
    id: { argument: '<key>', named: SSH_KEY },
    columns: COLUMNS,
  });

  const add = keys.create({
    name: 'add',
    description: 'add a public key (OpenSSH ed25519, rsa or ecdsa)',
    options: (command) =>
      command
        .option('--file <path>', 'public-key file, e.g. ~/.ssh/id_ed25519.pub')
        .option('--public-key <key>', 'the key itself ("ssh-ed25519 AAAA… comment")')
        .option('--name <name>', "name (default: the key's comment, else the file name)"),
    examples: [
      'nimbus ssh-keys add --file ~/.ssh/id_ed25519.pub',
      'nimbus ssh-keys add --name ci --public-key "$(cat ci.pub)"',
    ],
    body: (flags: { file?: string; publicKey?: string; name?: string }) => {
      if ((flags.file === undefined) === (flags.publicKey === undefined)) {
        throw new UsageError('Give the key with --file or --public-key (one of them)');
      }
      const key = flags.file !== undefined ? readPublicKeyFile(flags.file) : null;
      const publicKey = key?.publicKey ?? flags.publicKey!;
      const name = flags.name ?? key?.suggestedName ?? publicKey.trim().split(/\s+/)[2];
      if (!name) throw new UsageError('The key has no comment to name it by: give --name');
      return { name, public_key: publicKey };
    },
  });

  const list = keys.list({
    description: 'list SSH keys',
    filters: { name: ['--name <name>', 'only this name'] },
    sorts: ['created_at', 'name'],
    examples: ['nimbus ssh-keys list', 'nimbus ssh-keys list -o json --all'],
  });
  const get = keys.get({ description: 'show one SSH key', examples: ['nimbus ssh-keys get laptop'] });
  const remove = keys.delete({
    description: 'delete an SSH key',
    example: 'nimbus ssh-keys delete laptop',
    mode: { now: 'SSH key' },
  });
  return addCommands(group, add, list, get, remove);
}
