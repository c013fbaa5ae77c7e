/**
 * A list of events: what happened, when, and who did it (the API key and the address of the request,
 * the operator, or Nimbus itself).
 */
import type { Schemas } from '../api.ts';
import { formatDate } from '../format.ts';
import { Table } from './table.tsx';

type Event = Schemas['Event'];

/** Who did it, in words: `key_… from 203.0.113.4`, `Operator`, `Nimbus` (the platform's own work). */
export function actorText(actor: Event['actor'] | undefined): string {
  if (actor?.type === 'api_key') return `${actor.id} from ${actor.ip}`;
  return actor?.type === 'operator' ? 'Operator' : 'Nimbus';
}

export function EventTable({ caption, events }: { caption: string; events: Event[] }) {
  return (
    <Table
      caption={caption}
      rows={events}
      rowKey={(e) => e.id}
      columns={[
        { label: 'Event', render: (e) => e.type },
        { label: 'When', render: (e) => formatDate(e.timestamp) },
        { label: 'By', render: (e) => actorText(e.actor) },
      ]}
    />
  );
}
