/**
 * `nimbus alerts …`: alert policies (a metric threshold or an instance state, the instances they watch
 * and the channels they notify), their incidents, and test notifications.
 */
import { Command, Option } from 'commander';
// What a policy may say, from the server's own rules (a pure module; the client ships with the server).
import { ALERT_METRICS, ALERT_STATES, ALERT_WINDOWS } from '../../../resources/alerts/rules.js';
import { UsageError } from '../exit-codes.js';
import { type Column, printList } from '../output.js';
import { type Session, withSession } from '../session.js';
import { listCommand, resourceCommands } from './resource-commands.js';
import { addCommands, collect, defined, example, parseTags } from './shared.js';

type Json = Record<string, unknown>;

/** The parts of a policy the table shows. */
interface PolicyFields {
  metric?: string | null;
  compare?: string | null;
  threshold?: number | null;
  window?: string | null;
  state?: string | null;
  targets?: { instance_ids?: string[]; tags?: Record<string, string> };
  channels?: { email?: unknown[]; webhook_ids?: unknown[]; chat?: unknown[] };
}

interface NotificationFields {
  transition: string;
  channel: string;
  status: string;
  attempts: number;
}

/** The condition in words: `cpu_percent above 80 over 5m`, `error`, `stuck 10m`. */
function condition(item: Json): string {
  const policy = item as PolicyFields;
  if (policy.metric) return `${policy.metric} ${policy.compare} ${policy.threshold} over ${policy.window}`;
  return policy.state === 'stuck' ? `stuck for ${policy.window}` : 'error';
}

function targets(item: Json): string {
  const policy = item as PolicyFields;
  const ids = (policy.targets?.instance_ids ?? []) as string[];
  const tags = Object.entries((policy.targets?.tags ?? {}) as Record<string, string>);
  const parts = [
    ...(ids.length > 0 ? [ids.length === 1 ? ids[0] : `${ids.length} instances`] : []),
    ...(tags.length > 0 ? [tags.map(([k, v]) => `${k}=${v}`).join(',')] : []),
  ];
  return parts.length > 0 ? parts.join(' + ') : 'all instances';
}

function channels(item: Json): string {
  const c = (item as PolicyFields).channels ?? {};
  const count = (list: unknown[] | undefined, noun: string) =>
    list && list.length > 0 ? [`${list.length} ${noun}`] : [];
  return [...count(c.email, 'e-mail'), ...count(c.webhook_ids, 'webhook'), ...count(c.chat, 'chat')].join(
    ', ',
  );
}

const COLUMNS: Column[] = [
  { header: 'ID', value: (p) => p.id },
  { header: 'NAME', value: (p) => p.name },
  { header: 'CONDITION', value: (p) => condition(p) },
  { header: 'TARGETS', value: (p) => targets(p) },
  { header: 'CHANNELS', value: (p) => channels(p) },
  { header: 'ENABLED', value: (p) => p.enabled },
  { header: 'CREATED', value: (p) => p.created_at, wide: true },
  { header: 'DESCRIPTION', value: (p) => p.description, wide: true },
];

const INCIDENT_COLUMNS: Column[] = [
  { header: 'ID', value: (i) => i.id },
  { header: 'POLICY', value: (i) => i.policy_id },
  { header: 'INSTANCE', value: (i) => i.instance_name },
  { header: 'STATUS', value: (i) => i.status },
  { header: 'VALUE', value: (i) => i.value },
  { header: 'THRESHOLD', value: (i) => i.threshold },
  { header: 'STARTED', value: (i) => i.started_at },
  { header: 'RESOLVED', value: (i) => i.resolved_at },
  { header: 'WHY', value: (i) => i.resolution, wide: true },
  {
    header: 'NOTIFICATIONS',
    value: (i) =>
      ((i.notifications ?? []) as NotificationFields[])
        .map((n) => `${n.transition} ${n.channel} ${n.status}${n.attempts > 1 ? ` (${n.attempts})` : ''}`)
        .join('; '),
    wide: true,
  },
];

const TEST_COLUMNS: Column[] = [
  { header: 'CHANNEL', value: (r) => r.channel },
  { header: 'TARGET', value: (r) => r.target },
  { header: 'STATUS', value: (r) => r.status },
  { header: 'MS', value: (r) => r.duration_ms },
  { header: 'ERROR', value: (r) => r.error },
];

interface ConditionFlags {
  metric?: string;
  above?: string;
  below?: string;
  window?: string;
  state?: string;
}

interface TargetFlags {
  instance?: string[];
  tag?: string[];
}

interface ChannelFlags {
  email?: string[];
  webhook?: string[];
  slack?: string[];
  discord?: string[];
  chat?: string[];
}

/** Options every command that writes a policy takes. */
function policyOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--metric <metric>', 'metric threshold: the metric averaged').choices(ALERT_METRICS),
    )
    .option('--above <value>', 'fire when the average is above this (percent, or bytes/s for rates)')
    .option('--below <value>', 'fire when the average is below this')
    .addOption(
      new Option('--window <window>', 'averaged over this long; for --state stuck: how long').choices(
        ALERT_WINDOWS,
      ),
    )
    .addOption(new Option('--state <state>', 'instance state instead of a metric').choices(ALERT_STATES))
    .option('--instance <id>', 'watch this instance (repeatable)', collect)
    .option('--tag <key=value>', 'watch instances with this tag (repeatable: all of them)', collect)
    .option(
      '--email <address>',
      'e-mail this address (repeatable; needs NIMBUS_SMTP_URL on the server)',
      collect,
    )
    .option('--webhook <id>', 'send the alert events to this webhook subscription (repeatable)', collect)
    .option('--slack <url>', 'post to this Slack incoming webhook (repeatable)', collect)
    .option('--discord <url>', 'post to this Discord webhook (repeatable)', collect)
    .option('--chat <url>', 'post the alert event as generic JSON to this URL (repeatable)', collect)
    .option('--description <text>', 'what the policy is for');
}

function conditionBody(flags: ConditionFlags): Json {
  if (flags.above !== undefined && flags.below !== undefined)
    throw new UsageError('--above or --below, not both');
  const given = flags.above ?? flags.below;
  const threshold = given === undefined ? undefined : Number(given);
  if (threshold !== undefined && !Number.isFinite(threshold)) {
    throw new UsageError(`${flags.above !== undefined ? '--above' : '--below'} ${given}: expected a number`);
  }
  return defined({
    metric: flags.metric,
    compare: flags.above !== undefined ? 'above' : flags.below !== undefined ? 'below' : undefined,
    threshold,
    window: flags.window,
    state: flags.state,
  });
}

function targetsBody(flags: TargetFlags): Json | undefined {
  if (flags.instance === undefined && flags.tag === undefined) return undefined;
  return defined({ instance_ids: flags.instance, tags: parseTags(flags.tag) });
}

function chatOf(flags: ChannelFlags): Json[] | undefined {
  if (flags.slack === undefined && flags.discord === undefined && flags.chat === undefined) return undefined;
  return [
    ...(flags.slack ?? []).map((url) => ({ url, format: 'slack' })),
    ...(flags.discord ?? []).map((url) => ({ url, format: 'discord' })),
    ...(flags.chat ?? []).map((url) => ({ url, format: 'generic' })),
  ];
}

async function getPolicy(session: Session, id: string): Promise<Json> {
  return (await session.nimbus.get('/v1/alerts/{id}', { params: { path: { id } } })).data as Json;
}

export function alertsCommand(): Command {
  const group = new Command('alerts')
    .alias('alert')
    .description(
      'alert policies: metric thresholds and instance states, notified by e-mail, webhook or chat',
    );
  example(
    group,
    'nimbus alerts create "High CPU" --metric cpu_percent --above 80 --window 5m --tag env=prod --email oncall@example.com --slack https://hooks.slack.com/services/T0/B0/XXXX',
    'nimbus alerts incidents --status firing',
  );

  const policies = resourceCommands({
    path: '/v1/alerts',
    id: { help: 'policy id', prefix: 'alr_' },
    columns: COLUMNS,
  });

  const create = policies.create({
    description: 'create a policy',
    argument: ['<name>', 'what to call it'],
    options: (command) => policyOptions(command).option('--disabled', 'create it switched off'),
    examples: [
      'nimbus alerts create "High CPU" --metric cpu_percent --above 80 --window 5m --tag env=prod --email oncall@example.com',
      'nimbus alerts create "Broken boots" --state error --chat https://hooks.example.com/nimbus',
      'nimbus alerts create "Stuck" --state stuck --window 10m --webhook whk_0123',
    ],
    body: (
      flags: ConditionFlags & TargetFlags & ChannelFlags & { description?: string; disabled?: boolean },
      _session,
      [name],
    ) =>
      ({
        name: name!,
        ...conditionBody(flags),
        ...defined({
          description: flags.description,
          targets: targetsBody(flags),
          enabled: flags.disabled ? false : undefined,
        }),
        channels: defined({ email: flags.email, webhook_ids: flags.webhook, chat: chatOf(flags) }),
      }) as never,
  });

  const list = policies.list({
    description: 'list policies',
    sorts: ['created_at', 'name'],
    examples: ['nimbus alerts list -o wide'],
  });
  const get = policies.get({
    description: 'show one policy',
    examples: ['nimbus alerts get alr_0123 -o yaml'],
  });
  const update = policies.update({
    description: 'change a policy; a channel option replaces that kind of channel, the others stay',
    options: (command) =>
      policyOptions(command)
        .option('--name <name>', 'new name')
        .option('--enable', 'switch it on')
        .option('--disable', 'switch it off (resolves its open incidents)'),
    examples: [
      'nimbus alerts update alr_0123 --above 90',
      'nimbus alerts update alr_0123 --email oncall@example.com --email lead@example.com',
      'nimbus alerts update alr_0123 --disable',
    ],
    body: async (
      flags: ConditionFlags &
        TargetFlags &
        ChannelFlags & { name?: string; description?: string; enable?: boolean; disable?: boolean },
      session,
      id,
    ) => {
      if (flags.enable && flags.disable) throw new UsageError('--enable or --disable, not both');
      const chat = chatOf(flags);
      let channelsBody: Json | undefined;
      if (flags.email !== undefined || flags.webhook !== undefined || chat !== undefined) {
        const current = (await getPolicy(session, id)).channels as Record<string, unknown>;
        channelsBody = {
          email: flags.email ?? current.email,
          webhook_ids: flags.webhook ?? current.webhook_ids,
          chat: chat ?? current.chat,
        };
      }
      return {
        ...conditionBody(flags),
        ...defined({
          name: flags.name,
          description: flags.description,
          targets: targetsBody(flags),
          channels: channelsBody,
          enabled: flags.enable ? true : flags.disable ? false : undefined,
        }),
      } as never;
    },
  });

  const remove = policies.delete({
    description: 'delete a policy with its incidents',
    example: 'nimbus alerts delete alr_0123',
    mode: { now: 'alert policy' },
  });

  const test = new Command('test')
    .description('send a test notification to every channel of a policy now')
    .argument(...policies.argument);
  example(test, 'nimbus alerts test alr_0123');
  test.action(
    withSession(async (session, [id]) => {
      const { data } = await session.nimbus.post('/v1/alerts/{id}/test', { params: { path: { id: id! } } });
      const results = (data as Json).results as Json[];
      printList(results, TEST_COLUMNS, session.out);
    }),
  );

  const incidents = listCommand({
    name: 'incidents',
    description: "incidents, newest first: a policy's, or every policy's",
    argument: ['[id]', 'policy id (default: every policy)'],
    filters: {
      status: ['--status <status>', 'only firing or only resolved ones', ['firing', 'resolved']],
      instance_id: ['--instance <id>', 'only this instance'],
    },
    sorts: ['started_at'],
    examples: ['nimbus alerts incidents --status firing', 'nimbus alerts incidents alr_0123 -o wide'],
    columns: INCIDENT_COLUMNS,
    path: ([id]) =>
      id ? { path: '/v1/alerts/{id}/incidents', params: { id } } : { path: '/v1/alerts/incidents' },
  });

  return addCommands(group, create, list, get, update, remove, test, incidents);
}
