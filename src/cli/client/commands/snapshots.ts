/** `nimbus snapshots …`: point-in-time copies of volumes and instances' root disks, and restores. */
import { STATE_TABLES } from '@nimbus/sdk';
import { Command } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import { tableTarget } from '../wait.js';
import { resourceCommands } from './resource-commands.js';
import {
  addCommands,
  collect,
  defined,
  example,
  type InstanceType,
  integer,
  parseTags,
  type Region,
  resolveId,
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

interface RestoreFlags {
  name?: string;
  size?: number;
  region?: string;
  tag?: string[];
  targetVolume?: string;
  instance?: string;
  newInstance?: string;
  type?: string;
}

export function snapshotsCommand(): Command {
  const group = new Command('snapshots').alias('snapshot').description('snapshots of volumes and instances');
  example(group, 'nimbus snapshots create nightly --instance web-1 --wait', 'nimbus snapshots list');

  const snapshots = resourceCommands({
    path: '/v1/snapshots',
    id: { help: 'snapshot id', prefix: 'snap_' },
    columns: COLUMNS,
  });

  const create = snapshots.create({
    description: "snapshot a volume, or an instance's root disk",
    argument: ['<name>', 'snapshot name'],
    options: (command) =>
      command
        .option('--volume <volume>', 'the volume (id or name)')
        .option('--instance <instance>', 'the instance whose root disk to copy (id or name)')
        .option('--tag <key=value>', 'tag (repeatable)', collect),
    examples: [
      'nimbus snapshots create before-upgrade --instance web-1 --wait',
      'nimbus snapshots create data-1-monday --volume data-1',
    ],
    body: async (flags: { volume?: string; instance?: string; tag?: string[] }, session, [name]) => {
      if ((flags.volume === undefined) === (flags.instance === undefined)) {
        throw new UsageError('Name the source with --volume or --instance (one of them)');
      }
      return {
        name: name!,
        ...defined({
          volume_id: flags.volume === undefined ? undefined : await resolveId(session, flags.volume, VOLUME),
          instance_id:
            flags.instance === undefined ? undefined : await resolveId(session, flags.instance, INSTANCE),
          tags: parseTags(flags.tag),
        }),
      };
    },
    wait: { until: tableTarget('snapshot', 'create') },
  });

  const list = snapshots.list({
    description: 'list snapshots',
    filters: {
      status: ['--status <status>', 'only this status', [...STATE_TABLES.snapshot.statuses]],
      kind: ['--kind <kind>', 'manual or made by a backup schedule', ['manual', 'scheduled']],
      source_volume_id: ['--volume <id>', 'only snapshots of this volume'],
      source_instance_id: ['--instance <id>', 'only snapshots of this instance'],
      region: ['--region <region>', 'only this region'],
    },
    sorts: ['created_at', 'name', 'size_gb'],
    examples: [
      'nimbus snapshots list --instance ins_0123',
      'nimbus snapshots list --kind scheduled --all -o json',
    ],
  });
  const get = snapshots.get({
    description: 'show one snapshot',
    examples: ['nimbus snapshots get snap_0123'],
  });
  const update = snapshots.update({
    description: 'rename or retag a snapshot',
    options: (command) =>
      command
        .option('--name <name>', 'new name')
        .option('--tag <key=value>', 'the tags it should have (repeatable)', collect),
    examples: ['nimbus snapshots update snap_0123 --name keep-forever'],
    body: (flags: { name?: string; tag?: string[] }) =>
      defined({ name: flags.name, tags: parseTags(flags.tag) }),
    nothing: 'Nothing to update: give --name or --tag',
  });

  const restore = snapshots.action({
    name: 'restore',
    description:
      'restore: a volume snapshot into a new volume (or over a detached one), an instance snapshot onto its stopped instance or into a new instance; with no option, a new volume named after a volume snapshot, or an instance snapshot onto its own stopped instance',
    options: (command) =>
      command
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
        .option('--type <instance-type>', 'with --new-instance: its type'),
    examples: [
      'nimbus snapshots restore snap_0123 --name data-restored',
      'nimbus snapshots restore snap_0456 --new-instance web-2 --type compute-2x',
    ],
    send: async (session, id, flags: RestoreFlags) => {
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
      return (await session.nimbus.post('/v1/snapshots/{id}/restore', { params: { path: { id } }, body }))
        .data;
    },
  });

  const remove = snapshots.delete({
    description: 'delete a snapshot',
    example: 'nimbus snapshots delete snap_0123 --wait',
    mode: 'async',
  });

  return addCommands(group, create, list, get, update, restore, remove);
}
