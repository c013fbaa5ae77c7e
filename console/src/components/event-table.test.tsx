import { render, screen, within } from '@testing-library/preact';
import { describe, expect, it } from 'vitest';
import type { Schemas } from '../api.ts';
import { EventTable } from './event-table.tsx';

const event = (id: string, type: string, actor: Schemas['Event']['actor']): Schemas['Event'] => ({
  id,
  type,
  timestamp: '2026-11-28T09:00:00.000Z',
  resource_id: 'ins_1',
  data: {},
  actor,
});

describe('EventTable', () => {
  it('says who did each event: the key and its address, the operator, or Nimbus', () => {
    render(
      <EventTable
        caption="Recent events"
        events={[
          event('evt_3', 'instance.started', { type: 'system' }),
          event('evt_2', 'instance.updated', { type: 'operator' }),
          event('evt_1', 'instance.created', { type: 'api_key', id: 'key_01abc', ip: '203.0.113.4' }),
        ]}
      />,
    );
    const rows = within(screen.getByRole('table', { name: 'Recent events' })).getAllByRole('row');
    expect(rows[0]?.textContent).toContain('By');
    const byCells = rows.slice(1).map((row) => row.querySelector('td[data-label="By"]')?.textContent);
    expect(byCells).toEqual(['Nimbus', 'Operator', 'key_01abc from 203.0.113.4']);
  });
});
