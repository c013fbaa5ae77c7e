/** `nimbus events …`: what happened to the account's resources, newest first. */
import { Command } from 'commander';
import { type Column, printList } from '../output.js';
import { withSession } from '../session.js';
import { example, type ListFlags, listOptions, printItem, runList } from './shared.js';

/** Who did it, in a few words: `key_… from 203.0.113.4`, `operator`, `system`. */
function actorText(actor: unknown): string {
  const { type, id, ip } = (actor ?? {}) as { type?: string; id?: string; ip?: string };
  if (type === 'api_key') return `${id} from ${ip}`;
  return type ?? 'system';
}

const COLUMNS: Column[] = [
  { header: 'ID', value: (e) => e.id },
  { header: 'TYPE', value: (e) => e.type },
  { header: 'RESOURCE', value: (e) => e.resource_id },
  { header: 'TIME', value: (e) => e.timestamp },
  { header: 'ACTOR', value: (e) => actorText(e.actor) },
  { header: 'DATA', value: (e) => e.data, wide: true },
];
const TYPE_COLUMNS: Column[] = [
  { header: 'TYPE', value: (t) => t.type },
  { header: 'DESCRIPTION', value: (t) => t.description },
];

export function eventsCommand(): Command {
  const group = new Command('events').description('events of the account (the ones webhooks deliver)');
  example(group, 'nimbus events list --resource ins_0123', 'nimbus events types');

  const list = listOptions(
    new Command('list')
      .alias('ls')
      .description('list events, newest first')
      .option('--type <type>', 'only this event type (nimbus events types)')
      .option('--resource <id>', 'only events of this resource')
      .option('--since <time>', 'only events at or after this time (ISO 8601)')
      .option('--actor <key-id>', 'only events of requests made with this API key')
      .option('--actor-type <type>', 'only events of this kind of actor: api_key, operator or system'),
    ['created_at'],
  );
  example(
    list,
    'nimbus events list --type instance.created',
    'nimbus events list --resource ins_0123 --all -o json',
    'nimbus events list --actor key_0123',
  );
  list.action(
    withSession<
      ListFlags & { type?: string; resource?: string; since?: string; actor?: string; actorType?: string }
    >((session, _args, flags) =>
      runList(
        session,
        '/v1/events',
        {
          query: {
            type: flags.type,
            resource_id: flags.resource,
            since: flags.since,
            actor_id: flags.actor,
            actor_type: flags.actorType,
          },
        },
        COLUMNS,
        flags,
      ),
    ),
  );

  const get = new Command('get')
    .description('show one event with its data')
    .argument('<id>', 'event id (evt_…)');
  example(get, 'nimbus events get evt_0123 -o json');
  get.action(
    withSession(async (session, [id]) => {
      printItem(
        session,
        (await session.nimbus.get('/v1/events/{id}', { params: { path: { id: id! } } })).data,
      );
    }),
  );

  const types = new Command('types').description('every event type, as webhooks take them');
  example(types, 'nimbus events types');
  types.action(
    withSession(async (session) => {
      printList((await session.nimbus.get('/v1/events/types')).data, TYPE_COLUMNS, session.out);
    }),
  );
  return group.addCommand(list).addCommand(get).addCommand(types);
}
