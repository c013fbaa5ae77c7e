/**
 * `nimbus public-ips …`: addresses the account keeps, assigned to one instance at a time. Every change
 * is complete in its answer (the instance's `public_ip` follows in the same transaction), so no command
 * here takes --wait.
 */
import { Command } from 'commander';
import type { Column } from '../output.js';
import { resourceCommands } from './resource-commands.js';
import {
  addCommands,
  collect,
  defined,
  example,
  PROTECTED_COLUMN,
  parseTags,
  protectionChange,
  protectOptions,
  type Region,
  resolveId,
} from './shared.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (ip) => ip.id },
  { header: 'NAME', value: (ip) => ip.name },
  { header: 'ADDRESS', value: (ip) => ip.address },
  { header: 'REGION', value: (ip) => ip.region },
  { header: 'INSTANCE', value: (ip) => ip.instance_id },
  { header: 'AUTO DELETE', value: (ip) => ip.auto_delete, wide: true },
  PROTECTED_COLUMN,
  { header: 'TAGS', value: (ip) => ip.tags, wide: true },
  { header: 'CREATED', value: (ip) => ip.created_at, wide: true },
];
const PUBLIC_IP = { prefix: 'ip_', path: '/v1/public-ips', noun: 'public IP' } as const;
const INSTANCE = { prefix: 'ins_', path: '/v1/instances', noun: 'instance' } as const;

export function publicIpsCommand(): Command {
  const group = new Command('public-ips')
    .alias('public-ip')
    .description('public IPv4 addresses you keep and move');
  example(
    group,
    'nimbus public-ips create --region us-east-1 --name web',
    'nimbus public-ips assign web --instance web-1',
  );

  const ips = resourceCommands({
    path: '/v1/public-ips',
    id: { argument: '<public-ip>', named: PUBLIC_IP },
    columns: COLUMNS,
  });

  const create = ips.create({
    description: 'allocate an address in a region (billed while unassigned)',
    options: (command) =>
      protectOptions(
        command
          .requiredOption('--region <region>', 'region')
          .option('--name <name>', 'name (default: ip- and the address)')
          .option('--tag <key=value>', 'tag (repeatable)', collect),
      ),
    idempotent: 'public IP',
    examples: ['nimbus public-ips create --region us-east-1 --name web --protect'],
    body: (flags: { region: string; name?: string; tag?: string[]; protect?: boolean }) => ({
      region: flags.region as Region,
      ...defined({
        name: flags.name,
        tags: parseTags(flags.tag),
        protection: protectionChange(flags.protect),
      }),
    }),
  });

  const list = ips.list({
    description: 'list public IPs',
    filters: {
      region: ['--region <region>', 'only this region'],
      name: ['--name <name>', 'only this name'],
      instance_id: ['--instance <id>', 'only the one assigned to this instance'],
      assigned: [
        '--assigned <true|false>',
        'only assigned (true) or unassigned (false) ones',
        ['true', 'false'],
      ],
    },
    sorts: ['created_at', 'name', 'address'],
    examples: ['nimbus public-ips list --assigned false', 'nimbus public-ips list -o json'],
  });
  const get = ips.get({ description: 'show one public IP', examples: ['nimbus public-ips get web'] });
  const update = ips.update({
    description: 'change name, tags (replacing them), whether it goes with its instance, or its protection',
    options: (command) =>
      protectOptions(
        command
          .option('--name <name>', 'new name')
          .option('--tag <key=value>', 'the tags it should have (repeatable)', collect)
          .option('--keep', 'keep the address when its instance is deleted (auto_delete false)')
          .option('--auto-delete', 'release the address with its instance (auto_delete true)'),
      ),
    examples: ['nimbus public-ips update web-1-ip --keep', 'nimbus public-ips update web --protect'],
    body: (flags: {
      name?: string;
      tag?: string[];
      keep?: boolean;
      autoDelete?: boolean;
      protect?: boolean;
    }) =>
      defined({
        name: flags.name,
        tags: parseTags(flags.tag),
        auto_delete: flags.keep ? false : flags.autoDelete ? true : undefined,
        protection: protectionChange(flags.protect),
      }),
  });

  const assign = ips.action({
    name: 'assign',
    description: 'assign to an instance of the same region that has no public IP',
    options: (command) => command.requiredOption('--instance <instance>', 'instance id or name'),
    examples: ['nimbus public-ips assign web --instance web-2'],
    send: async (session, id, flags: { instance: string }) => {
      const instanceId = await resolveId(session, flags.instance, INSTANCE);
      return (
        await session.nimbus.post('/v1/public-ips/{id}/assign', {
          params: { path: { id } },
          body: { instance_id: instanceId },
        })
      ).data;
    },
  });

  const unassign = ips.action({
    name: 'unassign',
    description: 'take it off its instance (the account keeps it)',
    examples: ['nimbus public-ips unassign web'],
    send: async (session, id) =>
      (await session.nimbus.post('/v1/public-ips/{id}/unassign', { params: { path: { id } } })).data,
  });

  const remove = ips.delete({
    description: 'release an unassigned address',
    example: 'nimbus public-ips delete web',
    mode: { now: 'public IP' },
  });

  return addCommands(group, create, list, get, update, assign, unassign, remove);
}
