/** `nimbus webhooks …`: event subscriptions, their deliveries, tests and secrets. */
import { Command } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import { listCommand, resourceCommands } from './resource-commands.js';
import { addCommands, collect, defined, example, printItem } from './shared.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (w) => w.id },
  { header: 'URL', value: (w) => w.url },
  { header: 'EVENTS', value: (w) => w.events },
  { header: 'STATUS', value: (w) => w.status },
  { header: 'ENABLED', value: (w) => w.enabled, wide: true },
  { header: 'DESCRIPTION', value: (w) => w.description, wide: true },
  { header: 'CREATED', value: (w) => w.created_at, wide: true },
];
const DELIVERY_COLUMNS: Column[] = [
  { header: 'ID', value: (d) => d.id },
  { header: 'EVENT', value: (d) => d.event_type },
  { header: 'STATUS', value: (d) => d.status },
  { header: 'ATTEMPTS', value: (d) => d.attempts },
  { header: 'HTTP', value: (d) => d.last_status_code },
  { header: 'CREATED', value: (d) => d.created_at },
  { header: 'NEXT ATTEMPT', value: (d) => d.next_attempt_at, wide: true },
  { header: 'ERROR', value: (d) => d.last_error, wide: true },
];

export function webhooksCommand(): Command {
  const group = new Command('webhooks')
    .alias('webhook')
    .description('webhook subscriptions: signed event deliveries to your URL');
  example(
    group,
    'nimbus webhooks create --url https://hooks.example.com/nimbus --event instance.created --event instance.stopped',
    'nimbus webhooks list',
  );

  const webhooks = resourceCommands({
    path: '/v1/webhooks',
    id: { help: 'webhook id', prefix: 'whk_' },
    columns: COLUMNS,
  });

  const create = webhooks.create({
    description: 'subscribe a URL to events (the secret is shown once)',
    options: (command) =>
      command
        .requiredOption('--url <url>', 'HTTPS URL that receives the deliveries')
        .requiredOption(
          '--event <type>',
          'event type, or * for all (repeatable; nimbus events types)',
          collect,
        )
        .option('--secret <secret>', 'signing secret, at least 16 characters (default: generated)')
        .option('--description <text>', 'what it is for')
        .option('--disabled', 'create it switched off'),
    examples: ['nimbus webhooks create --url https://hooks.example.com/nimbus --event "*"'],
    body: (flags: {
      url: string;
      event: string[];
      secret?: string;
      description?: string;
      disabled?: boolean;
    }) =>
      ({
        url: flags.url,
        events: flags.event,
        ...defined({
          secret: flags.secret,
          description: flags.description,
          enabled: flags.disabled ? false : undefined,
        }),
      }) as never,
    notice: 'Store the secret now: it is not shown again.',
  });

  const list = webhooks.list({
    description: 'list subscriptions',
    sorts: ['created_at'],
    examples: ['nimbus webhooks list -o wide'],
  });
  const get = webhooks.get({
    description: 'show one subscription',
    examples: ['nimbus webhooks get whk_0123'],
  });
  const update = webhooks.update({
    description: 'change URL, events, description, or switch on/off',
    options: (command) =>
      command
        .option('--url <url>', 'new URL')
        .option('--event <type>', 'the events it should get (repeatable; replaces them)', collect)
        .option('--description <text>', 'description')
        .option('--enable', 'switch it on (also re-enables one disabled after failures)')
        .option('--disable', 'switch it off'),
    examples: [
      'nimbus webhooks update whk_0123 --enable',
      'nimbus webhooks update whk_0123 --event instance.created',
    ],
    body: (flags: {
      url?: string;
      event?: string[];
      description?: string;
      enable?: boolean;
      disable?: boolean;
    }) => {
      if (flags.enable && flags.disable) throw new UsageError('--enable or --disable, not both');
      return defined({
        url: flags.url,
        events: flags.event,
        description: flags.description,
        enabled: flags.enable ? true : flags.disable ? false : undefined,
      }) as never;
    },
  });

  const remove = webhooks.delete({
    description: 'delete a subscription',
    example: 'nimbus webhooks delete whk_0123',
    mode: { now: 'webhook' },
  });

  const test = webhooks.action({
    name: 'test',
    description: 'send a webhook.test delivery now',
    examples: ['nimbus webhooks test whk_0123'],
    send: async (session, id) =>
      (await session.nimbus.post('/v1/webhooks/{id}/test', { params: { path: { id } } })).data,
  });

  const deliveries = listCommand({
    name: 'deliveries',
    description: 'deliveries of a subscription, newest first',
    argument: webhooks.argument,
    filters: {
      status: ['--status <status>', 'only this status', ['pending', 'succeeded', 'failed']],
      event_type: ['--event <type>', 'only this event type'],
    },
    sorts: ['created_at'],
    examples: ['nimbus webhooks deliveries whk_0123 --status failed'],
    columns: DELIVERY_COLUMNS,
    path: ([id]) => ({ path: '/v1/webhooks/{id}/deliveries', params: { id: id! } }),
  });

  const redeliver = new Command('redeliver')
    .description('send a delivery again')
    .argument(...webhooks.argument)
    .argument('<delivery>', 'delivery id (dlv_…)');
  example(redeliver, 'nimbus webhooks redeliver whk_0123 dlv_0456');
  redeliver.action(
    withSession(async (session, [id, deliveryId]) => {
      const { data } = await session.nimbus.post('/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver', {
        params: { path: { id: id!, delivery_id: deliveryId! } },
      });
      printItem(session, data);
    }),
  );

  const rotate = webhooks.action({
    name: 'rotate-secret',
    description:
      'replace the signing secret (the old one keeps signing for a while, so receivers can switch)',
    options: (command) =>
      command.option('--secret <secret>', 'the new secret (default: generated and shown once)'),
    examples: ['nimbus webhooks rotate-secret whk_0123 -o json'],
    send: async (session, id, flags: { secret?: string }) =>
      (
        await session.nimbus.post('/v1/webhooks/{id}/rotate-secret', {
          params: { path: { id } },
          body: defined({ secret: flags.secret }),
        })
      ).data,
  });

  return addCommands(group, create, list, get, update, remove, test, deliveries, redeliver, rotate);
}
