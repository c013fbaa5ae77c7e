/** How an alert message from the stream changes the Alerts page's incident rows (alerts.tsx). */
import { describe, expect, it } from 'vitest';
import type { Schemas } from '../api.ts';
import type { AlertMessage } from '../live.ts';
import { alertNews, withAlert } from './alerts.tsx';

type Incident = Schemas['AlertIncident'];

function incident(id: string, status: Incident['status'] = 'firing'): Incident {
  return {
    id,
    policy_id: 'alr_1',
    instance_id: 'ins_1',
    instance_name: 'web-1',
    status,
    value: 95,
    threshold: 80,
    resolved_value: status === 'resolved' ? 10 : null,
    resolution: status === 'resolved' ? 'recovered' : null,
    started_at: '2026-04-06T12:00:00.000Z',
    resolved_at: status === 'resolved' ? '2026-04-06T12:05:00.000Z' : null,
    notifications: [],
  };
}

function message(event: AlertMessage['event'], incidentId: string, value = 95): AlertMessage {
  return {
    type: 'alert',
    event,
    instance_id: 'ins_2',
    policy_id: 'alr_1',
    incident_id: incidentId,
    name: 'High CPU',
    metric: 'cpu_percent',
    compare: 'above',
    state: null,
    window: '1m',
    value,
    threshold: 80,
    started_at: '2026-04-06T12:10:00.000Z',
    resolved_at: event === 'alert.resolved' ? '2026-04-06T12:20:00.000Z' : null,
    timestamp: '2026-04-06T12:20:00.000Z',
  };
}

const ALL = { status: '', page: 1 } as const;

describe('withAlert', () => {
  it('a new firing incident goes on top of the first page, named after its instance', () => {
    const rows = [incident('inc_old', 'resolved')];
    const next = withAlert(rows, message('alert.firing', 'inc_new'), ALL, 'web-2');
    expect(next.map((row) => [row.id, row.status])).toEqual([
      ['inc_new', 'firing'],
      ['inc_old', 'resolved'],
    ]);
    expect(next[0]).toMatchObject({
      instance_id: 'ins_2',
      instance_name: 'web-2',
      value: 95,
      threshold: 80,
      started_at: '2026-04-06T12:10:00.000Z',
      resolved_at: null,
    });
    expect(rows).toHaveLength(1);
  });

  it('keeps a page at its 20 rows', () => {
    const rows = Array.from({ length: 20 }, (_, i) => incident(`inc_${i}`));
    const next = withAlert(rows, message('alert.firing', 'inc_new'), ALL, 'web-2');
    expect(next).toHaveLength(20);
    expect(next[0]!.id).toBe('inc_new');
    expect(next[19]!.id).toBe('inc_18');
  });

  it('a firing incident is not added to a later page, a Resolved-only list, or twice', () => {
    const rows = [incident('inc_a')];
    for (const view of [
      { status: '', page: 2 },
      { status: 'resolved', page: 1 },
    ] as const) {
      expect(withAlert(rows, message('alert.firing', 'inc_new'), view, 'web-2')).toEqual(rows);
    }
    expect(withAlert(rows, message('alert.firing', 'inc_a'), ALL, 'web-2')).toEqual(rows);
    expect(
      withAlert(rows, message('alert.firing', 'inc_new'), { status: 'firing', page: 1 }, 'x'),
    ).toHaveLength(2);
  });

  it('a resolved incident turns resolved in place, or leaves a Firing-only list', () => {
    const rows = [incident('inc_a'), incident('inc_b')];
    const resolved = withAlert(rows, message('alert.resolved', 'inc_b', 10), ALL, 'web-1');
    expect(resolved.map((row) => row.status)).toEqual(['firing', 'resolved']);
    expect(resolved[1]).toMatchObject({
      resolved_value: 10,
      resolved_at: '2026-04-06T12:20:00.000Z',
      // The message has no resolution: the page reads it from the API right after.
      resolution: null,
      value: 95,
    });
    const firingOnly = withAlert(
      rows,
      message('alert.resolved', 'inc_b', 10),
      { status: 'firing', page: 1 },
      'w',
    );
    expect(firingOnly.map((row) => row.id)).toEqual(['inc_a']);
  });

  it('a resolved message for a row not shown, or already resolved, changes nothing', () => {
    const rows = [incident('inc_a', 'resolved')];
    expect(withAlert(rows, message('alert.resolved', 'inc_a', 10), ALL, 'web-1')).toEqual(rows);
    expect(withAlert(rows, message('alert.resolved', 'inc_zzz', 10), ALL, 'web-1')).toEqual(rows);
  });
});

describe('alertNews', () => {
  it('says which policy fired or resolved on which instance, with the value when there is one', () => {
    expect(alertNews(message('alert.firing', 'inc_1'), 'web-2')).toBe(
      'High CPU is firing on web-2 (value 95).',
    );
    expect(alertNews(message('alert.resolved', 'inc_1', 10), 'web-2')).toBe(
      'High CPU resolved on web-2 (value 10).',
    );
    expect(alertNews({ ...message('alert.firing', 'inc_1'), value: null }, 'web-2')).toBe(
      'High CPU is firing on web-2.',
    );
  });
});
