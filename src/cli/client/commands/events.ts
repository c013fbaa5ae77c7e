/** `nimbus events …`: what happened to the account's resources, newest first. */
import { Command } from 'commander';
import { type Column, printList } from '../output.js';
import { withSession } from '../session.js';
import { getCommand, listCommand } from './resource-commands.js';
import { addCommands, example } from './shared.js';

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

  const list = listCommand({
    description: 'list events, newest first',
    filters: {
      type: ['--type <type>', 'only this event type (nimbus events types)'],
      resource_id: ['--resource <id>', 'only events of this resource'],
      since: ['--since <time>', 'only events at or after this time (ISO 8601)'],
      actor_id: ['--actor <key-id>', 'only events of requests made with this API key'],
      actor_type: ['--actor-type <type>', 'only events of this kind of actor: api_key, operator or system'],
    },
    sorts: ['created_at'],
    examples: [
      'nimbus events list --type instance.created',
      'nimbus events list --resource ins_0123 --all -o json',
      'nimbus events list --actor key_0123',
    ],
    columns: COLUMNS,
    path: '/v1/events',
  });

  const get = getCommand({
    description: 'show one event with its data',
    argument: ['<id>', 'event id (evt_…)'],
    examples: ['nimbus events get evt_0123 -o json'],
    path: '/v1/events/{id}',
  });

  const types = new Command('types').description('every event type, as webhooks take them');
  example(types, 'nimbus events types');
  types.action(
    withSession(async (session) => {
      printList((await session.nimbus.get('/v1/events/types')).data, TYPE_COLUMNS, session.out);
    }),
  );
  return addCommands(group, list, get, types);
}
