/** `nimbus snapshots …`: point-in-time copies of volumes and instances' root disks, and restores. */
import { STATE_TABLES } from '@nimbus/sdk';
import { Command, Option } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import { tableTarget, type WaitFlags, waitOptions } from '../wait.js';
import {
  collect,
  defined,
  deleteCommand,
  example,
  finishAction,
  type InstanceType,
  integer,
  type ListFlags,
  listOptions,
  parseTags,
  printItem,
  type Region,
  resolveId,
  runList,
} from './shared.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (s) => s.id },
  { header: 'NAME', value: (s) => s.name },
  { header: 'STATUS', value: (s) => s.status },
  { header: 'SIZE GB', value: (s) => s.size_gb },
  { header: 'SOURCE', value: (s) => s.source_instance_id ?? s.source_volume_id },
  { header: 'REGION', value: (s) => s.region },
  { header: 'KIND', value: (s) => s.kind, wide: true },
  { header: 'CREATED', value: (s) => s.created_at, wide: true },
  { header: 'ERROR', value: (s) => s.error, wide: true },
];
const VOLUME = { prefix: 'vol_', path: '/v1/volumes', noun: 'volume' } as const;
const INSTANCE = { prefix: 'ins_', path: '/v1/instances', noun: 'instance' } as const;

export function snapshotsCommand(): Command {
  const group = new Command('snapshots').alias('snapshot').description('snapshots of volumes and instances');
  example(group, 'nimbus snapshots create nightly --instance web-1 --wait', 'nimbus snapshots list');

  const create = new Command('create')
    .description("snapshot a volume, or an instance's root disk")
    .argument('<name>', 'snapshot name')
    .option('--volume <volume>', 'the volume (id or name)')
    .option('--instance <instance>', 'the instance whose root disk to copy (id or name)')
    .option('--tag <key=value>', 'tag (repeatable)', collect);
  for (const option of waitOptions(tableTarget('snapshot', 'create'))) create.addOption(option);
  example(
    create,
    'nimbus snapshots create before-upgrade --instance web-1 --wait',
    'nimbus snapshots create data-1-monday --volume data-1',
  );
  create.action(
    withSession<WaitFlags & { volume?: string; instance?: string; tag?: string[] }>(
      async (session, [name], flags) => {
        if ((flags.volume === undefined) === (flags.instance === undefined)) {
          throw new UsageError('Name the source with --volume or --instance (one of them)');
        }
        const body = {
          name: name!,
          ...defined({
            volume_id:
              flags.volume === undefined ? undefined : await resolveId(session, flags.volume, VOLUME),
            instance_id:
              flags.instance === undefined ? undefined : await resolveId(session, flags.instance, INSTANCE),
            tags: parseTags(flags.tag),
          }),
        };
        const { data } = await session.nimbus.post('/v1/snapshots', { body });
        await finishAction(session, data, tableTarget('snapshot', 'create'), flags);
      },
    ),
  );

  const list = listOptions(
    new Command('list')
      .alias('ls')
      .description('list snapshots')
      .addOption(new Option('--status <status>', 'only this status').choices(STATE_TABLES.snapshot.statuses))
      .addOption(
        new Option('--kind <kind>', 'manual or made by a backup schedule').choices(['manual', 'scheduled']),
      )
      .option('--volume <id>', 'only snapshots of this volume')
      .option('--instance <id>', 'only snapshots of this instance')
      .option('--region <region>', 'only this region'),
    ['created_at', 'name', 'size_gb'],
  );
  example(
    list,
    'nimbus snapshots list --instance ins_0123',
    'nimbus snapshots list --kind scheduled --all -o json',
  );
  list.action(
    withSession<
      ListFlags & { status?: string; kind?: string; volume?: string; instance?: string; region?: string }
    >((session, _args, flags) =>
      runList(
        session,
        '/v1/snapshots',
        {
          query: {
            status: flags.status,
            kind: flags.kind,
            source_volume_id: flags.volume,
            source_instance_id: flags.instance,
            region: flags.region,
          },
        },
        COLUMNS,
        flags,
      ),
    ),
  );

  const get = new Command('get').description('show one snapshot').argument('<id>', 'snapshot id (snap_…)');
  example(get, 'nimbus snapshots get snap_0123');
  get.action(
    withSession(async (session, [id]) => {
      printItem(
        session,
        (await session.nimbus.get('/v1/snapshots/{id}', { params: { path: { id: id! } } })).data,
      );
    }),
  );

  const update = new Command('update')
    .description('rename or retag a snapshot')
    .argument('<id>', 'snapshot id')
    .option('--name <name>', 'new name')
    .option('--tag <key=value>', 'the tags it should have (repeatable)', collect);
  example(update, 'nimbus snapshots update snap_0123 --name keep-forever');
  update.action(
    withSession<{ name?: string; tag?: string[] }>(async (session, [id], flags) => {
      const body = defined({ name: flags.name, tags: parseTags(flags.tag) });
      if (Object.keys(body).length === 0) throw new UsageError('Nothing to update: give --name or --tag');
      printItem(
        session,
        (await session.nimbus.patch('/v1/snapshots/{id}', { params: { path: { id: id! } }, body })).data,
      );
    }),
  );

  const restore = new Command('restore')
    .description(
      'restore: a volume snapshot into a new volume (or over a detached one), an instance snapshot onto its stopped instance or into a new instance; with no option, a new volume named after a volume snapshot, or an instance snapshot onto its own stopped instance',
    )
    .argument('<id>', 'snapshot id')
    .option('--name <name>', 'name of the new volume (default: the snapshot’s)')
    .option('--size <gb>', 'size of the new volume (at least the snapshot’s)', integer)
    .option('--region <region>', 'region of the new volume')
    .option('--tag <key=value>', 'tags of the new volume (repeatable)', collect)
    .option('--target-volume <id>', 'overwrite this detached volume instead')
    .option('--instance <id>', 'restore onto this stopped instance (instance snapshots)')
    .option(
      '--new-instance <name>',
      'boot a new instance of this name from it (instance snapshots; with --type)',
    )
    .option('--type <instance-type>', 'with --new-instance: its type');
  example(
    restore,
    'nimbus snapshots restore snap_0123 --name data-restored',
    'nimbus snapshots restore snap_0456 --new-instance web-2 --type compute-2x',
  );
  restore.action(
    withSession<{
      name?: string;
      size?: number;
      region?: string;
      tag?: string[];
      targetVolume?: string;
      instance?: string;
      newInstance?: string;
      type?: string;
    }>(async (session, [id], flags) => {
      if ((flags.newInstance === undefined) !== (flags.type === undefined)) {
        throw new UsageError('--new-instance and --type go together');
      }
      const body = defined({
        name: flags.name,
        size_gb: flags.size,
        region: flags.region as Region | undefined,
        tags: parseTags(flags.tag),
        target_volume_id: flags.targetVolume,
        instance_id: flags.instance,
        instance:
          flags.newInstance === undefined
            ? undefined
            : { name: flags.newInstance, instance_type: flags.type as InstanceType },
      });
      const { data } = await session.nimbus.post('/v1/snapshots/{id}/restore', {
        params: { path: { id: id! } },
        body,
      });
      printItem(session, data);
    }),
  );

  const remove = deleteCommand({
    description: 'delete a snapshot',
    argument: ['<id>', 'snapshot id'],
    example: 'nimbus snapshots delete snap_0123 --wait',
    path: '/v1/snapshots/{id}',
    mode: 'async',
  });

  return group
    .addCommand(create)
    .addCommand(list)
    .addCommand(get)
    .addCommand(update)
    .addCommand(restore)
    .addCommand(remove);
}
