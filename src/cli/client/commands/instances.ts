/** `nimbus instances …`: create (every field of the instance record), list, get, update, the actions, network. */

import { readFileSync } from 'node:fs';
import { STATE_TABLES } from '@nimbus/sdk';
import { Command, Option } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import type { Session } from '../session.js';
import { tableTarget } from '../wait.js';
import { getCommand, resourceCommands } from './resource-commands.js';
import {
  addCommands,
  collect,
  defined,
  example,
  type Image,
  type InstanceType,
  PROTECTED_COLUMN,
  parseTags,
  protectionChange,
  protectOptions,
  type Region,
} from './shared.js';
import { expandHome, isKeyFile, sshKeyIdForFile } from './ssh-key-files.js';

export const INSTANCE_COLUMNS: Column[] = [
  { header: 'ID', value: (i) => i.id },
  { header: 'NAME', value: (i) => i.name },
  { header: 'STATUS', value: (i) => i.status },
  { header: 'TYPE', value: (i) => i.instance_type },
  { header: 'REGION', value: (i) => i.region },
  { header: 'PUBLIC IP', value: (i) => i.public_ip },
  { header: 'IMAGE', value: (i) => i.image, wide: true },
  { header: 'PRIVATE IP', value: (i) => i.private_ip, wide: true },
  { header: 'HOSTNAME', value: (i) => i.hostname, wide: true },
  { header: 'TAGS', value: (i) => i.tags, wide: true },
  PROTECTED_COLUMN,
  { header: 'CREATED', value: (i) => i.created_at, wide: true },
];

const FIREWALL_PRESETS = ['ssh-only', 'web', 'allow-all', 'none'];
const INSTANCE = { prefix: 'ins_', path: '/v1/instances', noun: 'instance' } as const;

/** `daily:7` as {frequency: 'daily', retention: 7}. */
export function parseBackupSchedule(value: string): {
  frequency: 'hourly' | 'daily' | 'weekly';
  retention: number;
} {
  const match = /^(hourly|daily|weekly):(\d+)$/.exec(value);
  if (!match)
    throw new UsageError(`--backup ${value}: expected hourly|daily|weekly:<retention 1-90>, e.g. daily:7`);
  return { frequency: match[1] as 'hourly' | 'daily' | 'weekly', retention: Number(match[2]) };
}

/** What an update's --backup or --no-backup asks for: a schedule, none (null), or no change (undefined). */
export function backupChange(value: string | false | undefined) {
  return value === undefined ? undefined : value === false ? null : parseBackupSchedule(value);
}

function userData(options: { userData?: string; userDataFile?: string }): string | undefined {
  if (options.userData !== undefined && options.userDataFile !== undefined) {
    throw new UsageError('Give --user-data or --user-data-file, not both');
  }
  if (options.userDataFile !== undefined) return readFileSync(expandHome(options.userDataFile), 'utf8');
  return options.userData;
}

/** SSH keys by id, by name, or as public-key files (uploaded when the account does not have them yet). */
async function sshKeys(session: Session, references: string[] | undefined): Promise<string[] | undefined> {
  if (references === undefined) return undefined;
  const ids: string[] = [];
  for (const reference of references) {
    ids.push(isKeyFile(reference) ? await sshKeyIdForFile(session, reference) : reference);
  }
  return ids;
}

interface CreateFlags {
  type: string;
  region: string;
  image: string;
  sshKey?: string[];
  tag?: string[];
  userData?: string;
  userDataFile?: string;
  encryptionKey?: string;
  firewallPreset?: string;
  monitoring: boolean;
  backup?: string;
  publicIp?: boolean;
  protect?: boolean;
}

const instances = resourceCommands({
  path: '/v1/instances',
  id: { argument: '<instance>', named: INSTANCE },
  columns: INSTANCE_COLUMNS,
});

const create = () =>
  instances.create({
    description: 'create an instance (answered at once as starting; --wait follows it to running)',
    argument: ['<name>', 'instance name'],
    options: (command) =>
      protectOptions(command)
        .requiredOption('--type <instance-type>', 'instance type (nimbus catalog types)')
        .requiredOption('--region <region>', 'region (nimbus catalog regions)')
        .requiredOption('--image <image>', 'OS image (nimbus catalog images)')
        .option('--ssh-key <key>', 'SSH key id, name or public-key file (repeatable)', collect)
        .option('--tag <key=value>', 'tag (repeatable)', collect)
        .option('--user-data <text>', 'user data for the instance (at most 16 KiB)')
        .option('--user-data-file <file>', 'user data read from a file')
        .option('--encryption-key <id>', 'custom encryption key id for the disks')
        .addOption(new Option('--firewall-preset <preset>', 'firewall preset').choices(FIREWALL_PRESETS))
        .option('--no-monitoring', 'turn monitoring off')
        .option('--backup <frequency:retention>', 'backup schedule, e.g. daily:7')
        .option('--no-public-ip', 'no public IP (reachable privately and through a VPN)'),
    idempotent: 'instance',
    examples: [
      'nimbus instances create web-1 --type compute-2x --region us-east-1 --image ubuntu-24.04 --ssh-key ~/.ssh/id_ed25519.pub --wait',
      'nimbus instances create db-1 --type memory-4x --region eu-central-1 --image debian-12 --tag env=prod --backup daily:7 -o json',
    ],
    body: async (flags: CreateFlags, session, [name]) => ({
      name: name!,
      instance_type: flags.type as InstanceType,
      region: flags.region as Region,
      image: flags.image as Image,
      ...defined({
        ssh_keys: await sshKeys(session, flags.sshKey),
        tags: parseTags(flags.tag),
        user_data: userData(flags),
        encryption_key_id: flags.encryptionKey,
        firewall_preset: flags.firewallPreset as 'ssh-only' | 'web' | 'allow-all' | 'none' | undefined,
        backup_schedule: flags.backup === undefined ? undefined : parseBackupSchedule(flags.backup),
        protection: protectionChange(flags.protect),
      }),
      // Sent only when turned off, so the server's default stays the one place that decides.
      ...(flags.monitoring ? {} : { monitoring: false }),
      ...(flags.publicIp === false ? { public_ip: false } : {}),
    }),
    wait: { until: tableTarget('instance', 'create') },
  });

const list = () =>
  instances.list({
    description: 'list instances (newest first)',
    filters: {
      status: ['--status <status>', 'only this status', [...STATE_TABLES.instance.statuses]],
      region: ['--region <region>', 'only this region'],
      name: ['--name <name>', 'only this name'],
      tag: ['--tag <key:value>', 'only instances with this tag'],
    },
    sorts: ['created_at', 'name', 'status', 'instance_type'],
    examples: [
      'nimbus instances list',
      'nimbus instances list --status running --all -o json',
      'nimbus instances list -o wide --tag env:prod',
    ],
  });

const get = () =>
  instances.get({
    description: 'show one instance, every field',
    examples: ['nimbus instances get web-1', 'nimbus instances get ins_0123 -o json'],
  });

interface UpdateFlags {
  name?: string;
  tag?: string[];
  monitoring?: boolean;
  backup?: string | false;
  firewallPreset?: string;
  protect?: boolean;
}

const update = () =>
  instances.update({
    description:
      'change name, tags (replacing them all), monitoring, backup schedule, firewall preset or deletion protection',
    options: (command) =>
      protectOptions(command)
        .option('--name <name>', 'new name')
        .option(
          '--tag <key=value>',
          'the tags it should have (repeatable; replaces the current tags)',
          collect,
        )
        .option('--monitoring', 'turn monitoring on')
        .option('--no-monitoring', 'turn monitoring off')
        .option('--backup <frequency:retention>', 'backup schedule, e.g. daily:7')
        .option('--no-backup', 'remove the backup schedule')
        .addOption(new Option('--firewall-preset <preset>', 'firewall preset').choices(FIREWALL_PRESETS)),
    examples: [
      'nimbus instances update web-1 --name web-01 --tag env=prod --tag team=web',
      'nimbus instances update web-1 --no-backup',
      'nimbus instances update web-1 --protect',
    ],
    body: (flags: UpdateFlags) =>
      defined({
        name: flags.name,
        tags: parseTags(flags.tag),
        monitoring: flags.monitoring,
        backup_schedule: backupChange(flags.backup),
        firewall_preset: flags.firewallPreset as 'ssh-only' | 'web' | 'allow-all' | 'none' | undefined,
        protection: protectionChange(flags.protect),
      }),
  });

const start = () =>
  instances.action({
    name: 'start',
    description: 'start a stopped instance',
    examples: ['nimbus instances start web-1 --wait'],
    send: async (session, id) =>
      (await session.nimbus.post('/v1/instances/{id}/start', { params: { path: { id } } })).data,
    wait: { until: tableTarget('instance', 'start') },
  });

const stop = () =>
  instances.action({
    name: 'stop',
    description: 'stop an instance (--force: power off at once, the way out of a stuck one)',
    options: (command) => command.option('--force', 'power off at once, without a graceful shutdown'),
    examples: ['nimbus instances stop web-1 --wait', 'nimbus instances stop web-1 --force'],
    send: async (session, id, flags: { force?: boolean }) =>
      (
        await session.nimbus.post('/v1/instances/{id}/stop', {
          params: { path: { id } },
          body: flags.force ? { force: true } : {},
        })
      ).data,
    wait: { until: tableTarget('instance', 'stop') },
  });

const restart = () =>
  instances.action({
    name: 'restart',
    description: 'restart an instance',
    examples: ['nimbus instances restart web-1 --wait --timeout 120'],
    send: async (session, id) =>
      (await session.nimbus.post('/v1/instances/{id}/restart', { params: { path: { id } } })).data,
    wait: { until: tableTarget('instance', 'restart') },
  });

const resize = () =>
  instances.action({
    name: 'resize',
    description: 'change the instance type (a running instance restarts)',
    options: (command) => command.requiredOption('--type <instance-type>', 'the new instance type'),
    examples: ['nimbus instances resize web-1 --type compute-4x --wait'],
    send: async (session, id, flags: { type: string }) =>
      (
        await session.nimbus.post('/v1/instances/{id}/resize', {
          params: { path: { id } },
          body: { instance_type: flags.type as InstanceType },
        })
      ).data,
    // The table gives a resize no target: the instance goes back to where it was, so a stopped one is
    // resized in place and stays stopped, a running one comes back running.
    wait: { until: 'running', target: (instance) => (instance.status === 'stopped' ? 'stopped' : 'running') },
  });

/** An action, not the groups' delete (deleteCommand): an instance's delete has no `rm` alias. */
const remove = () =>
  instances.action({
    name: 'delete',
    description: 'delete an instance and its root disk',
    examples: ['nimbus instances delete web-1 --wait'],
    send: async (session, id) =>
      (await session.nimbus.delete('/v1/instances/{id}', { params: { path: { id } } })).data,
    wait: { until: tableTarget('instance', 'delete') },
  });

const network = () =>
  getCommand({
    name: 'network',
    description: "show an instance's addresses, DNS names and effective firewall rules",
    argument: instances.argument,
    examples: ['nimbus instances network web-1 -o yaml'],
    path: '/v1/instances/{id}/network',
    named: INSTANCE,
  });

export function instancesCommand(): Command {
  const group = new Command('instances').alias('instance').description('compute instances');
  example(group, 'nimbus instances list', 'nimbus instances create --help');
  return addCommands(
    group,
    create(),
    list(),
    get(),
    update(),
    start(),
    stop(),
    restart(),
    resize(),
    remove(),
    network(),
  );
}
