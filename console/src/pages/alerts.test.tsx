/**
 * How alert messages from the stream change the Alerts page (alerts.tsx): the row logic (withAlert,
 * alertNews), and the page itself against a fake API and stream — rows from the messages at once, and one
 * read of the incidents for a burst of them.
 */
import { act, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FakeSocket, fakeFetch } from '../../test-fakes.ts';
import type { Schemas } from '../api.ts';
import type { AlertMessage } from '../live.ts';
import { signIn } from '../session.ts';
import { AlertsPage, alertNews, REREAD_AFTER_MS, testOutcomes, withAlert } from './alerts.tsx';

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

describe('the Alerts page, live', () => {
  /** What GET /v1/alerts/incidents answers: the server's side, which the test changes as incidents fire. */
  let stored: Incident[] = [];
  let api: ReturnType<typeof fakeFetch>;

  beforeEach(() => {
    stored = [];
    FakeSocket.made = [];
    FakeSocket.statuses = { ins_1: 'running', ins_2: 'running' };
    api = fakeFetch({
      '/v1/alerts': () => ({
        data: [
          {
            id: 'alr_1',
            name: 'High CPU',
            enabled: true,
            metric: 'cpu_percent',
            compare: 'above',
            threshold: 80,
            window: '1m',
            state: null,
            targets: { instance_ids: [], tags: {} },
            channels: { email: ['ops@example.com'], webhook_ids: [], chat: [] },
          },
        ],
      }),
      '/v1/alerts/incidents': () => ({
        data: stored.slice(0, 20),
        pagination: { page: 1, limit: 20, total: stored.length, total_pages: Math.ceil(stored.length / 20) },
      }),
      '/v1/instances': () => ({
        data: [
          { id: 'ins_2', name: 'web-2' },
          { id: 'ins_1', name: 'web-1' },
        ],
      }),
    });
    vi.stubGlobal('fetch', vi.fn(api.fetch));
    vi.stubGlobal('WebSocket', FakeSocket);
    signIn('nmb_alerts_test_key');
  });
  afterEach(() => vi.unstubAllGlobals());

  const incidentReads = () => api.requests.filter((r) => r.startsWith('/v1/alerts/incidents')).length;

  it("watches the account's instances and shows a burst of incidents at once, then reads them once", async () => {
    render(<AlertsPage />);
    await screen.findByText('No incidents');
    await waitFor(() => expect(FakeSocket.made).toHaveLength(1));
    const socket = FakeSocket.made[0]!;
    await act(async () => socket.admit());
    await waitFor(() =>
      expect(socket.sent).toContainEqual({ type: 'subscribe', interval: 60, instances: ['ins_2', 'ins_1'] }),
    );
    expect(incidentReads()).toBe(1);

    // A collection fires 25 incidents: the server has them, and the stream says so one by one.
    const burst = Array.from({ length: 25 }, (_, i) => ({
      ...message('alert.firing', `inc_${String(i).padStart(2, '0')}`),
      instance_id: i % 2 ? 'ins_1' : 'ins_2',
    }));
    stored = burst.map((m) => ({ ...incident(m.incident_id), instance_id: m.instance_id })).reverse();
    await act(async () => {
      for (const m of burst) socket.deliver(m);
    });
    const table = screen.getByRole('table', { name: 'Alert incidents' });
    // Straight from the messages: the newest 20, newest first, named after their instances.
    expect(table.querySelectorAll('tbody tr')).toHaveLength(20);
    const names = [...table.querySelectorAll('tbody tr')].map((row) => row.children[2]!.textContent);
    expect(names.slice(0, 3)).toEqual(['web-2', 'web-1', 'web-2']);
    expect(screen.getByText('High CPU is firing on web-2 (value 95).')).toBeTruthy();
    expect(incidentReads(), 'no read before the burst is over').toBe(1);

    await act(() => new Promise<void>((resolve) => setTimeout(resolve, REREAD_AFTER_MS + 100)));
    expect(incidentReads(), 'one read for the whole burst').toBe(2);
    await waitFor(() =>
      expect(screen.getByRole('navigation', { name: 'Pages' }).textContent).toContain('of 2'),
    );

    // It resolves: the row turns resolved from the message, before the read.
    stored = stored.map((row) =>
      row.id === 'inc_24'
        ? { ...row, status: 'resolved', resolution: 'recovered', resolved_at: row.started_at }
        : row,
    );
    await act(async () =>
      socket.deliver({ ...message('alert.resolved', 'inc_24', 10), instance_id: 'ins_2' }),
    );
    const first = () => table.querySelector('tbody tr')!.textContent ?? '';
    expect(first()).toMatch(/^resolved/);
    expect(first()).not.toContain('recovered');
    await waitFor(() => expect(first()).toContain('(recovered)'));
    expect(incidentReads()).toBe(3);
  });
});

describe('withAlert with a policy filter', () => {
  it("a firing incident of another policy stays out of one policy's list; one of its own goes on top", () => {
    const rows = [incident('inc_old', 'resolved')];
    const other = { ...message('alert.firing', 'inc_other'), policy_id: 'alr_2' };
    expect(withAlert(rows, other, { ...ALL, policyId: 'alr_1' }, 'web-2').map((r) => r.id)).toEqual([
      'inc_old',
    ]);
    expect(
      withAlert(rows, message('alert.firing', 'inc_own'), { ...ALL, policyId: 'alr_1' }, 'web-2').map(
        (r) => r.id,
      ),
    ).toEqual(['inc_own', 'inc_old']);
  });
});

describe('testOutcomes', () => {
  it('gives one line per channel target, with the failure when there is one', () => {
    expect(
      testOutcomes({
        alert_id: 'alr_1',
        results: [
          {
            channel: 'email',
            target: 'ops@example.com',
            status: 'succeeded',
            error: null,
            duration_ms: 12,
            delivery_id: 'ntf_1',
          },
          {
            channel: 'chat',
            target: 'https://chat.example.com/hook',
            status: 'failed',
            error: 'HTTP 500',
            duration_ms: 40,
            delivery_id: 'ntf_2',
          },
        ],
      }),
    ).toEqual([
      'email ops@example.com: succeeded, 12 ms',
      'chat https://chat.example.com/hook: failed (HTTP 500), 40 ms',
    ]);
  });
});
