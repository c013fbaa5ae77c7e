/** `nimbus webhooks …`: event subscriptions, their deliveries, tests and secrets. */
import { Command, Option } from 'commander';
import { UsageError } from '../exit-codes.js';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import {
  collect,
  defined,
  deleteCommand,
  example,
  type ListFlags,
  listOptions,
  printItem,
  runList,
} from './shared.js';

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

  const create = new Command('create')
    .description('subscribe a URL to events (the secret is shown once)')
    .requiredOption('--url <url>', 'HTTPS URL that receives the deliveries')
    .requiredOption('--event <type>', 'event type, or * for all (repeatable; nimbus events types)', collect)
    .option('--secret <secret>', 'signing secret, at least 16 characters (default: generated)')
    .option('--description <text>', 'what it is for')
    .option('--disabled', 'create it switched off');
  example(create, 'nimbus webhooks create --url https://hooks.example.com/nimbus --event "*"');
  create.action(
    withSession<{ url: string; event: string[]; secret?: string; description?: string; disabled?: boolean }>(
      async (session, _args, flags) => {
        const body = {
          url: flags.url,
          events: flags.event,
          ...defined({
            secret: flags.secret,
            description: flags.description,
            enabled: flags.disabled ? false : undefined,
          }),
        };
        printItem(session, (await session.nimbus.post('/v1/webhooks', { body: body as never })).data);
        if (session.humanOutput) process.stderr.write('Store the secret now: it is not shown again.\n');
      },
    ),
  );

  const list = listOptions(new Command('list').alias('ls').description('list subscriptions'), ['created_at']);
  example(list, 'nimbus webhooks list -o wide');
  list.action(
    withSession<ListFlags>((session, _args, flags) => runList(session, '/v1/webhooks', {}, COLUMNS, flags)),
  );

  const get = new Command('get').description('show one subscription').argument('<id>', 'webhook id (whk_…)');
  example(get, 'nimbus webhooks get whk_0123');
  get.action(
    withSession(async (session, [id]) => {
      printItem(
        session,
        (await session.nimbus.get('/v1/webhooks/{id}', { params: { path: { id: id! } } })).data,
      );
    }),
  );

  const update = new Command('update')
    .description('change URL, events, description, or switch on/off')
    .argument('<id>', 'webhook id')
    .option('--url <url>', 'new URL')
    .option('--event <type>', 'the events it should get (repeatable; replaces them)', collect)
    .option('--description <text>', 'description')
    .option('--enable', 'switch it on (also re-enables one disabled after failures)')
    .option('--disable', 'switch it off');
  example(
    update,
    'nimbus webhooks update whk_0123 --enable',
    'nimbus webhooks update whk_0123 --event instance.created',
  );
  update.action(
    withSession<{
      url?: string;
      event?: string[];
      description?: string;
      enable?: boolean;
      disable?: boolean;
    }>(async (session, [id], flags) => {
      if (flags.enable && flags.disable) throw new UsageError('--enable or --disable, not both');
      const body = defined({
        url: flags.url,
        events: flags.event,
        description: flags.description,
        enabled: flags.enable ? true : flags.disable ? false : undefined,
      });
      if (Object.keys(body).length === 0)
        throw new UsageError('Nothing to update: give at least one option (see --help)');
      printItem(
        session,
        (
          await session.nimbus.patch('/v1/webhooks/{id}', {
            params: { path: { id: id! } },
            body: body as never,
          })
        ).data,
      );
    }),
  );

  const remove = deleteCommand({
    description: 'delete a subscription',
    argument: ['<id>', 'webhook id'],
    example: 'nimbus webhooks delete whk_0123',
    path: '/v1/webhooks/{id}',
    mode: { now: 'webhook' },
  });

  const test = new Command('test')
    .description('send a webhook.test delivery now')
    .argument('<id>', 'webhook id');
  example(test, 'nimbus webhooks test whk_0123');
  test.action(
    withSession(async (session, [id]) => {
      printItem(
        session,
        (await session.nimbus.post('/v1/webhooks/{id}/test', { params: { path: { id: id! } } })).data,
      );
    }),
  );

  const deliveries = listOptions(
    new Command('deliveries')
      .description('deliveries of a subscription, newest first')
      .argument('<id>', 'webhook id')
      .addOption(
        new Option('--status <status>', 'only this status').choices(['pending', 'succeeded', 'failed']),
      )
      .option('--event <type>', 'only this event type'),
    ['created_at'],
  );
  example(deliveries, 'nimbus webhooks deliveries whk_0123 --status failed');
  deliveries.action(
    withSession<ListFlags & { status?: string; event?: string }>((session, [id], flags) =>
      runList(
        session,
        '/v1/webhooks/{id}/deliveries',
        { path: { id: id! }, query: { status: flags.status, event_type: flags.event } },
        DELIVERY_COLUMNS,
        flags,
      ),
    ),
  );

  const redeliver = new Command('redeliver')
    .description('send a delivery again')
    .argument('<id>', 'webhook id')
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

  const rotate = new Command('rotate-secret')
    .description(
      'replace the signing secret (the old one keeps signing for a while, so receivers can switch)',
    )
    .argument('<id>', 'webhook id')
    .option('--secret <secret>', 'the new secret (default: generated and shown once)');
  example(rotate, 'nimbus webhooks rotate-secret whk_0123 -o json');
  rotate.action(
    withSession<{ secret?: string }>(async (session, [id], flags) => {
      const { data } = await session.nimbus.post('/v1/webhooks/{id}/rotate-secret', {
        params: { path: { id: id! } },
        body: defined({ secret: flags.secret }),
      });
      printItem(session, data);
    }),
  );

  return group
    .addCommand(create)
    .addCommand(list)
    .addCommand(get)
    .addCommand(update)
    .addCommand(remove)
    .addCommand(test)
    .addCommand(deliveries)
    .addCommand(redeliver)
    .addCommand(rotate);
}
