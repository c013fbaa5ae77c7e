/** `nimbus ssh-keys …`: the account's SSH public keys, which instances are created with. */
import { Command } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import {
  deleteCommand,
  example,
  type ListFlags,
  listOptions,
  printItem,
  resolveId,
  runList,
} from './shared.js';
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

  const add = new Command('add')
    .description('add a public key (OpenSSH ed25519, rsa or ecdsa)')
    .option('--file <path>', 'public-key file, e.g. ~/.ssh/id_ed25519.pub')
    .option('--public-key <key>', 'the key itself ("ssh-ed25519 AAAA… comment")')
    .option('--name <name>', "name (default: the key's comment, else the file name)");
  example(
    add,
    'nimbus ssh-keys add --file ~/.ssh/id_ed25519.pub',
    'nimbus ssh-keys add --name ci --public-key "$(cat ci.pub)"',
  );
  add.action(
    withSession<{ file?: string; publicKey?: string; name?: string }>(async (session, _args, flags) => {
      if ((flags.file === undefined) === (flags.publicKey === undefined)) {
        throw new UsageError('Give the key with --file or --public-key (one of them)');
      }
      const key = flags.file !== undefined ? readPublicKeyFile(flags.file) : null;
      const publicKey = key?.publicKey ?? flags.publicKey!;
      const name = flags.name ?? key?.suggestedName ?? publicKey.trim().split(/\s+/)[2];
      if (!name) throw new UsageError('The key has no comment to name it by: give --name');
      const { data } = await session.nimbus.post('/v1/ssh-keys', { body: { name, public_key: publicKey } });
      printItem(session, data);
    }),
  );

  const list = listOptions(
    new Command('list').alias('ls').description('list SSH keys').option('--name <name>', 'only this name'),
    ['created_at', 'name'],
  );
  example(list, 'nimbus ssh-keys list', 'nimbus ssh-keys list -o json --all');
  list.action(
    withSession<ListFlags & { name?: string }>((session, _args, flags) =>
      runList(session, '/v1/ssh-keys', { query: { name: flags.name } }, COLUMNS, flags),
    ),
  );

  const get = new Command('get').description('show one SSH key').argument('<key>', 'id or name');
  example(get, 'nimbus ssh-keys get laptop');
  get.action(
    withSession(async (session, [reference]) => {
      const id = await resolveId(session, reference!, SSH_KEY);
      printItem(session, (await session.nimbus.get('/v1/ssh-keys/{id}', { params: { path: { id } } })).data);
    }),
  );

  const remove = deleteCommand({
    description: 'delete an SSH key',
    argument: ['<key>', 'id or name'],
    example: 'nimbus ssh-keys delete laptop',
    path: '/v1/ssh-keys/{id}',
    mode: { now: 'SSH key' },
    named: SSH_KEY,
  });
  return group.addCommand(add).addCommand(list).addCommand(get).addCommand(remove);
}
