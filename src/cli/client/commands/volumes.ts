/** `nimbus volumes …`: block storage, attached to instances in the same region. */
import { STATE_TABLES } from '@nimbus/sdk';
import { Command, Option } from 'commander';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import { tableTarget, type WaitFlags, waitOptions } from '../wait.js';
import { backupChange, parseBackupSchedule } from './instances.js';
import { createCommand, deleteCommand, getCommand, listCommand, updateCommand } from './resource-commands.js';
import {
  collect,
  defined,
  example,
  finishAction,
  integer,
  parseTags,
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

  const create = createCommand({
    description: 'create a volume (optionally formatted and attached as soon as it exists)',
    argument: ['<name>', 'volume name'],
    options: (command) =>
      command
        .requiredOption('--size <gb>', 'size in GB', integer)
        .requiredOption('--region <region>', 'region')
        .addOption(new Option('--filesystem <fs>', 'format it').choices(['ext4', 'xfs']))
        .option('--instance <instance>', 'attach to this instance (id or name) once created')
        .option('--tag <key=value>', 'tag (repeatable)', collect)
        .option('--backup <frequency:retention>', 'backup schedule, e.g. daily:7'),
    examples: [
      'nimbus volumes create data-1 --size 100 --region us-east-1 --filesystem ext4 --instance web-1 --wait',
    ],
    path: '/v1/volumes',
    body: async (
      flags: {
        size: number;
        region: string;
        filesystem?: string;
        instance?: string;
        tag?: string[];
        backup?: string;
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
      }),
    }),
    wait: {
      until: `${tableTarget('volume', 'create')} (${tableTarget('volume', 'attach')} with --instance)`,
      target: (body) => tableTarget('volume', body.instance_id ? 'attach' : 'create'),
    },
  });

  const list = listCommand({
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
    columns: COLUMNS,
    path: '/v1/volumes',
  });

  const get = getCommand({
    description: 'show one volume',
    argument: ['<volume>', 'id or name'],
    examples: ['nimbus volumes get data-1'],
    path: '/v1/volumes/{id}',
    named: VOLUME,
  });

  const update = updateCommand({
    description: 'change name, tags (replacing them) or backup schedule',
    argument: ['<volume>', 'id or name'],
    options: (command) =>
      command
        .option('--name <name>', 'new name')
        .option('--tag <key=value>', 'the tags it should have (repeatable)', collect)
        .option('--backup <frequency:retention>', 'backup schedule, e.g. weekly:4')
        .option('--no-backup', 'remove the backup schedule'),
    examples: ['nimbus volumes update data-1 --backup weekly:4'],
    path: '/v1/volumes/{id}',
    named: VOLUME,
    body: (flags: { name?: string; tag?: string[]; backup?: string | false }) =>
      defined({
        name: flags.name,
        tags: parseTags(flags.tag),
        backup_schedule: backupChange(flags.backup),
      }),
  });

  const attach = new Command('attach')
    .description('attach to an instance in the same region')
    .argument('<volume>', 'id or name')
    .requiredOption('--instance <instance>', 'instance id or name');
  for (const option of waitOptions(tableTarget('volume', 'attach'))) attach.addOption(option);
  example(attach, 'nimbus volumes attach data-1 --instance web-1 --wait');
  attach.action(
    withSession<WaitFlags & { instance: string }>(async (session, [reference], flags) => {
      const id = await resolveId(session, reference!, VOLUME);
      const instanceId = await resolveId(session, flags.instance, INSTANCE);
      const { data } = await session.nimbus.post('/v1/volumes/{id}/attach', {
        params: { path: { id } },
        body: { instance_id: instanceId },
      });
      await finishAction(session, data, tableTarget('volume', 'attach'), flags);
    }),
  );

  const detach = new Command('detach')
    .description('detach from its instance')
    .argument('<volume>', 'id or name');
  for (const option of waitOptions(tableTarget('volume', 'detach'))) detach.addOption(option);
  example(detach, 'nimbus volumes detach data-1 --wait');
  detach.action(
    withSession<WaitFlags>(async (session, [reference], flags) => {
      const id = await resolveId(session, reference!, VOLUME);
      const { data } = await session.nimbus.post('/v1/volumes/{id}/detach', { params: { path: { id } } });
      await finishAction(session, data, tableTarget('volume', 'detach'), flags);
    }),
  );

  const resize = new Command('resize')
    .description('grow a volume (sizes only grow, up to 16384 GB)')
    .argument('<volume>', 'id or name')
    .requiredOption('--size <gb>', 'new size in GB', integer);
  for (const option of waitOptions('done resizing')) resize.addOption(option);
  example(resize, 'nimbus volumes resize data-1 --size 200 --wait');
  resize.action(
    withSession<WaitFlags & { size: number }>(async (session, [reference], flags) => {
      const id = await resolveId(session, reference!, VOLUME);
      const { data } = await session.nimbus.post('/v1/volumes/{id}/resize', {
        params: { path: { id } },
        body: { size_gb: flags.size },
      });
      await finishAction(session, data, data.instance_id ? 'in-use' : 'available', flags);
    }),
  );

  const remove = deleteCommand({
    description: 'delete a detached volume',
    argument: ['<volume>', 'id or name'],
    example: 'nimbus volumes delete data-1 --wait',
    path: '/v1/volumes/{id}',
    mode: 'async',
    named: VOLUME,
  });

  return group
    .addCommand(create)
    .addCommand(list)
    .addCommand(get)
    .addCommand(update)
    .addCommand(attach)
    .addCommand(detach)
    .addCommand(resize)
    .addCommand(remove);
}
