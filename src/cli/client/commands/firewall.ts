/** `nimbus firewall …`: the account's firewall rules, and which rule decides a given packet. */
import { Command, Option } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import { resourceCommands } from './resource-commands.js';
import {
  addCommands,
  collect,
  defined,
  example,
  integer,
  parseTags,
  printItem,
  type Region,
  resolveId,
} from './shared.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (r) => r.id },
  { header: 'NAME', value: (r) => r.name },
  { header: 'DIRECTION', value: (r) => r.direction },
  { header: 'ACTION', value: (r) => r.action },
  { header: 'PROTOCOL', value: (r) => r.protocol },
  { header: 'PORTS', value: (r) => r.ports },
  { header: 'FROM/TO', value: (r) => (r.direction === 'inbound' ? r.sources : r.destinations) },
  { header: 'PRIORITY', value: (r) => r.priority },
  { header: 'REGION', value: (r) => r.region, wide: true },
  { header: 'ENABLED', value: (r) => r.enabled, wide: true },
  { header: 'TARGETS', value: (r) => r.targets, wide: true },
  { header: 'DESCRIPTION', value: (r) => r.description, wide: true },
];
const INSTANCE = { prefix: 'ins_', path: '/v1/instances', noun: 'instance' } as const;
const DIRECTIONS = ['inbound', 'outbound'];
const ACTIONS = ['allow', 'deny'];
const PROTOCOLS = ['tcp', 'udp', 'icmp', 'all'];

interface RuleFlags {
  description?: string;
  direction?: string;
  action?: string;
  protocol?: string;
  port?: string;
  source?: string[];
  destination?: string[];
  priority?: number;
  targetInstance?: string[];
  targetTag?: string[];
  enabled?: boolean;
}

/** The options create and update share; create makes some of them required. */
function ruleOptions(command: Command, required: boolean): Command {
  const choice = (flags: string, text: string, choices: string[]) => {
    const option = new Option(flags, text).choices(choices);
    return required ? option.makeOptionMandatory() : option;
  };
  return command
    .addOption(choice('--direction <direction>', 'inbound or outbound', DIRECTIONS))
    .addOption(choice('--action <action>', 'allow or deny', ACTIONS))
    .addOption(choice('--protocol <protocol>', 'tcp, udp, icmp or all', PROTOCOLS))
    .option('--port <port>', 'one port ("22") or a range ("8000-8100"); tcp and udp only')
    .option('--source <cidr>', 'inbound: address block it comes from (repeatable)', collect)
    .option('--destination <cidr>', 'outbound: address block it goes to (repeatable)', collect)
    .option('--priority <n>', 'lower numbers decide first', integer)
    .option(
      '--target-instance <id>',
      'only this instance (repeatable; default: every instance in the region)',
      collect,
    )
    .option('--target-tag <key=value>', 'only instances with this tag (repeatable)', collect)
    .option('--description <text>', 'what the rule is for');
}

function ruleBody(flags: RuleFlags) {
  const targets =
    flags.targetInstance === undefined && flags.targetTag === undefined
      ? undefined
      : defined({ instance_ids: flags.targetInstance, tags: parseTags(flags.targetTag, '--target-tag') });
  return defined({
    description: flags.description,
    direction: flags.direction as 'inbound' | 'outbound' | undefined,
    action: flags.action as 'allow' | 'deny' | undefined,
    protocol: flags.protocol as 'tcp' | 'udp' | 'icmp' | 'all' | undefined,
    ports: flags.port,
    sources: flags.source,
    destinations: flags.destination,
    priority: flags.priority,
    targets,
    enabled: flags.enabled,
  });
}

export function firewallCommand(): Command {
  const group = new Command('firewall').description('firewall rules');
  example(
    group,
    'nimbus firewall create allow-https --direction inbound --action allow --protocol tcp --port 443 --source 0.0.0.0/0 --region us-east-1',
    'nimbus firewall list',
  );

  const rules = resourceCommands({
    path: '/v1/firewall/rules',
    id: { help: 'rule id', prefix: 'fwr_' },
    columns: COLUMNS,
  });

  const create = rules.create({
    description: 'create a rule',
    argument: ['<name>', 'rule name'],
    options: (command) =>
      ruleOptions(command.requiredOption('--region <region>', 'region'), true).option(
        '--disabled',
        'create it switched off',
      ),
    examples: [
      'nimbus firewall create allow-https --direction inbound --action allow --protocol tcp --port 443 --source 0.0.0.0/0 --region us-east-1',
      'nimbus firewall create office-ssh --direction inbound --action allow --protocol tcp --port 22 --source 198.51.100.0/24 --region us-east-1 --target-tag role=web',
    ],
    body: (flags: RuleFlags & { region: string; disabled?: boolean }, _session, [name]) => {
      const rule = ruleBody({ ...flags, ...(flags.disabled ? { enabled: false } : {}) });
      return {
        ...rule,
        name: name!,
        region: flags.region as Region,
        direction: rule.direction!,
        action: rule.action!,
        protocol: rule.protocol!,
      };
    },
  });

  const list = rules.list({
    description: 'list rules',
    filters: {
      direction: ['--direction <direction>', 'only this direction', DIRECTIONS],
      protocol: ['--protocol <protocol>', 'only this protocol', PROTOCOLS],
      region: ['--region <region>', 'only this region'],
      instance_id: ['--instance <id>', 'only rules that apply to this instance'],
    },
    sorts: ['priority', 'created_at', 'name'],
    examples: [
      'nimbus firewall list --sort priority --order asc',
      'nimbus firewall list --instance ins_0123 -o json',
    ],
  });
  const get = rules.get({ description: 'show one rule', examples: ['nimbus firewall get fwr_0123'] });
  const update = rules.update({
    description: 'change a rule',
    options: (command) =>
      ruleOptions(command.option('--name <name>', 'new name'), false)
        .option('--enable', 'switch it on')
        .option('--disable', 'switch it off'),
    examples: ['nimbus firewall update fwr_0123 --port 8443', 'nimbus firewall update fwr_0123 --disable'],
    body: (flags: RuleFlags & { name?: string; enable?: boolean; disable?: boolean }) => {
      if (flags.enable && flags.disable) throw new UsageError('--enable or --disable, not both');
      const enabled = flags.enable ? true : flags.disable ? false : undefined;
      return {
        ...ruleBody({ ...flags, ...(enabled === undefined ? {} : { enabled }) }),
        ...defined({ name: flags.name }),
      };
    },
  });

  const remove = rules.delete({
    description: 'delete a rule',
    example: 'nimbus firewall delete fwr_0123',
    mode: { now: 'firewall rule' },
  });

  const check = new Command('check')
    .description('which rule decides a packet to or from an instance, and whether it passes')
    .argument('<instance>', 'id or name')
    .addOption(
      new Option('--direction <direction>', 'inbound or outbound').choices(DIRECTIONS).makeOptionMandatory(),
    )
    .addOption(
      new Option('--protocol <protocol>', 'tcp, udp or icmp')
        .choices(['tcp', 'udp', 'icmp'])
        .makeOptionMandatory(),
    )
    .option('--port <port>', 'port (tcp and udp)')
    .requiredOption('--address <ip>', 'the other end’s address');
  example(
    check,
    'nimbus firewall check web-1 --direction inbound --protocol tcp --port 22 --address 203.0.113.9',
  );
  check.action(
    withSession<{ direction: string; protocol: string; port?: string; address: string }>(
      async (session, [reference], flags) => {
        const id = await resolveId(session, reference!, INSTANCE);
        const query = {
          direction: flags.direction as 'inbound' | 'outbound',
          protocol: flags.protocol as 'tcp' | 'udp' | 'icmp',
          address: flags.address,
          ...defined({ port: flags.port === undefined ? undefined : Number(flags.port) }),
        };
        printItem(
          session,
          (await session.nimbus.get('/v1/instances/{id}/network/check', { params: { path: { id }, query } }))
            .data,
        );
      },
    ),
  );

  return addCommands(group, create, list, get, update, remove, check);
}
