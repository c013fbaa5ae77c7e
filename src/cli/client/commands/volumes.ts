/** `nimbus volumes …`: block storage, attached to instances in the same region. */
import { STATE_TABLES } from '@nimbus/sdk';
import { Command, Option } from 'commander';
import type { Column } from '../output.js';
import { tableTarget } from '../wait.js';
import { backupChange, parseBackupSchedule } from './instances.js';
import { resourceCommands } from './resource-commands.js';
import {
  addCommands,
  collect,
  defined,
  example,
  integer,
  PROTECTED_COLUMN,
  parseTags,
  protectionChange,
  protectOptions,
  type Region,
  resolveId,
} from './shared.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (v) => v.id },
  { header: 'NAME', value: (v) => v.name },
  { header: 'STATUS', value: (v) => v.status },
  { header: 'SIZE GB', value: (v) => v.size_gb },
  { header: 'REGION', value: (v) => v.region },
  { header: 'INSTANCE', value: (v) => v.instance_id },
  { header: 'KIND', value: (v) => v.kind, wide: true },
  { header: 'DEVICE', value: (v) => v.device_name, wide: true },
  { header: 'FILESYSTEM', value: (v) => v.filesystem, wide: true },
  { header: 'TAGS', value: (v) => v.tags, wide: true },
  PROTECTED_COLUMN,
  { header: 'CREATED', value: (v) => v.created_at, wide: true },
];
const VOLUME = { prefix: 'vol_', path: '/v1/volumes', noun: 'volume' } as const;
const INSTANCE = { prefix: 'ins_', path: '/v1/instances', noun: 'instance' } as const;
const STATUSES = [...STATE_TABLES.volume.statuses];

export function volumesCommand(): Command {
  const group = new Command('volumes').alias('volume').description('block storage volumes');
  example(
    group,
    'nimbus volumes create data-1 --size 100 --region us-east-1 --instance web-1 --wait',
    'nimbus volumes list',
  );

  const volumes = resourceCommands({
    path: '/v1/volumes',
    id: { argument: '<volume>', named: VOLUME },
    columns: COLUMNS,
  });

  const create = volumes.create({
    description: 'create a volume (optionally formatted and attached as soon as it exists)',
    argument: ['<name>', 'volume name'],
    options: (command) =>
      protectOptions(command)
        .requiredOption('--size <gb>', 'size in GB', integer)
        .requiredOption('--region <region>', 'region')
        .addOption(new Option('--filesystem <fs>', 'format it').choices(['ext4', 'xfs']))
        .option('--instance <instance>', 'attach to this instance (id or name) once created')
        .option('--tag <key=value>', 'tag (repeatable)', collect)
        .option('--backup <frequency:retention>', 'backup schedule, e.g. daily:7'),
    examples: [
      'nimbus volumes create data-1 --size 100 --region us-east-1 --filesystem ext4 --instance web-1 --wait',
    ],
    body: async (
      flags: {
        size: number;
        region: string;
        filesystem?: string;
        instance?: string;
        tag?: string[];
        backup?: string;
        protect?: boolean;
      },
      session,
      [name],
    ) => ({
      name: name!,
      size_gb: flags.size,
      region: flags.region as Region,
      ...defined({
        filesystem: flags.filesystem as 'ext4' | 'xfs' | undefined,
        instance_id:
          flags.instance === undefined ? undefined : await resolveId(session, flags.instance, INSTANCE),
        tags: parseTags(flags.tag),
        backup_schedule: flags.backup === undefined ? undefined : parseBackupSchedule(flags.backup),
        protection: protectionChange(flags.protect),
      }),
    }),
    wait: {
      until: `${tableTarget('volume', 'create')} (${tableTarget('volume', 'attach')} with --instance)`,
      target: (body) => tableTarget('volume', body.instance_id ? 'attach' : 'create'),
    },
  });

  const list = volumes.list({
    description: 'list volumes',
    filters: {
      status: ['--status <status>', 'only this status', STATUSES],
      region: ['--region <region>', 'only this region'],
      kind: ['--kind <kind>', 'data volumes or instances’ root disks', ['data', 'root']],
      instance_id: ['--instance <id>', 'only volumes attached to this instance'],
      name: ['--name <name>', 'only this name'],
      tag: ['--tag <key:value>', 'only volumes with this tag'],
    },
    sorts: ['created_at', 'name', 'size_gb'],
    examples: ['nimbus volumes list --kind data', 'nimbus volumes list --instance ins_0123 -o json'],
  });
  const get = volumes.get({ description: 'show one volume', examples: ['nimbus volumes get data-1'] });
  const update = volumes.update({
    description: 'change name, tags (replacing them), backup schedule or deletion protection',
    options: (command) =>
      protectOptions(command)
        .option('--name <name>', 'new name')
        .option('--tag <key=value>', 'the tags it should have (repeatable)', collect)
        .option('--backup <frequency:retention>', 'backup schedule, e.g. weekly:4')
        .option('--no-backup', 'remove the backup schedule'),
    examples: ['nimbus volumes update data-1 --backup weekly:4'],
    body: (flags: { name?: string; tag?: string[]; backup?: string | false; protect?: boolean }) =>
      defined({
        name: flags.name,
        tags: parseTags(flags.tag),
        backup_schedule: backupChange(flags.backup),
        protection: protectionChange(flags.protect),
      }),
  });

  const attach = volumes.action({
    name: 'attach',
    description: 'attach to an instance in the same region',
    options: (command) => command.requiredOption('--instance <instance>', 'instance id or name'),
    examples: ['nimbus volumes attach data-1 --instance web-1 --wait'],
    send: async (session, id, flags: { instance: string }) => {
      const instanceId = await resolveId(session, flags.instance, INSTANCE);
      return (
        await session.nimbus.post('/v1/volumes/{id}/attach', {
          params: { path: { id } },
          body: { instance_id: instanceId },
        })
      ).data;
    },
    wait: { until: tableTarget('volume', 'attach') },
  });

  const detach = volumes.action({
    name: 'detach',
    description: 'detach from its instance',
    examples: ['nimbus volumes detach data-1 --wait'],
    send: async (session, id) =>
      (await session.nimbus.post('/v1/volumes/{id}/detach', { params: { path: { id } } })).data,
    wait: { until: tableTarget('volume', 'detach') },
  });

  const resize = volumes.action({
    name: 'resize',
    description: 'grow a volume (sizes only grow, up to 16384 GB)',
    options: (command) => command.requiredOption('--size <gb>', 'new size in GB', integer),
    examples: ['nimbus volumes resize data-1 --size 200 --wait'],
    send: async (session, id, flags: { size: number }) =>
      (
        await session.nimbus.post('/v1/volumes/{id}/resize', {
          params: { path: { id } },
          body: { size_gb: flags.size },
        })
      ).data,
    wait: { until: 'done resizing', target: (volume) => (volume.instance_id ? 'in-use' : 'available') },
  });

  const remove = volumes.delete({
    description: 'delete a detached volume',
    example: 'nimbus volumes delete data-1 --wait',
    mode: 'async',
  });

  return addCommands(group, create, list, get, update, attach, detach, resize, remove);
}
