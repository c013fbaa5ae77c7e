/**
 * The stream banner's messages, and the live hook (live.ts) that drives it through a stream that drops:
 * reconnection with backoff (1 s, 2 s, 4 s … 30 s) said on the page, the attempt count reset once live
 * again, and no retry after a refusal (a bad key). The WebSocket is a fake the test plays the server on.
 */
import { act, render, screen } from '@testing-library/preact';
import { useState } from 'preact/hooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FakeSocket } from '../../test-fakes.ts';
import { type AlertMessage, type StreamState, useLive } from '../live.ts';
import { signIn } from '../session.ts';
import { StreamBanner } from './stream-banner.tsx';

describe('StreamBanner', () => {
  const shown = (state: StreamState) => {
    const { container, unmount } = render(<StreamBanner state={state} />);
    const text = container.textContent;
    const role = container.querySelector('[role="status"]') !== null;
    unmount();
    return { text, role };
  };

  it('says nothing while live or idle', () => {
    expect(shown({ kind: 'live' }).text).toBe('');
    expect(shown({ kind: 'idle' }).text).toBe('');
  });

  it('says when it connects, when it will reconnect and when it was refused, as a status', () => {
    expect(shown({ kind: 'connecting' })).toEqual({ text: 'Connecting to live updates…', role: true });
    expect(shown({ kind: 'reconnecting', attempt: 3, inSeconds: 4 })).toEqual({
      text: 'Live updates lost; reconnecting in 4 s (attempt 3).',
      role: true,
    });
    expect(shown({ kind: 'refused', message: 'Invalid API key' }).text).toBe(
      'Live updates unavailable: Invalid API key',
    );
  });
});

function Probe(props: { onAlert?: (message: AlertMessage) => void }) {
  const live = useLive({ instances: ['ins_a'], ...(props.onAlert ? { onAlert: props.onAlert } : {}) });
  return (
    <>
      <StreamBanner state={live.state} />
      <p data-testid="status">{live.statuses.ins_a ?? 'unknown'}</p>
    </>
  );
}

const banner = () => screen.queryByRole('status')?.textContent ?? null;
const latest = () => FakeSocket.made[FakeSocket.made.length - 1]!;
/** Lets the stream's promise chains settle (a macrotask later) and the page render. */
const flush = () => act(() => new Promise<void>((resolve) => setImmediate(resolve)));
/** Moves the faked timers on (the reconnection's backoff), and renders what they did. */
const advance = (ms: number) =>
  act(() => {
    vi.advanceTimersByTime(ms);
  });

describe('useLive with the stream banner', () => {
  beforeEach(() => {
    FakeSocket.made = [];
    FakeSocket.statuses = { ins_a: 'running' };
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    vi.stubGlobal('WebSocket', FakeSocket);
    signIn('nmb_live_test_key');
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it('authenticates with its first message, subscribes, and goes quiet once live', async () => {
    render(<Probe />);
    await flush();
    expect(banner()).toBe('Connecting to live updates…');
    expect(latest().url).toBe('wss://console.test/v1/metrics/stream');
    latest().admit();
    await flush();
    expect(latest().sent).toEqual([
      { type: 'auth', api_key: 'nmb_live_test_key' },
      { type: 'subscribe', interval: 60, instances: ['ins_a'] },
    ]);
    expect(banner()).toBeNull();
    expect(screen.getByTestId('status').textContent).toBe('running');
    latest().deliver({ type: 'status', instance_id: 'ins_a', status: 'stopping' });
    await flush();
    expect(screen.getByTestId('status').textContent).toBe('stopping');
  });

  it('a dropped stream reconnects after 1, 2, 4 s, says so, and starts again from 1 s once live', async () => {
    render(<Probe />);
    await flush();
    latest().admit();
    await flush();
    const waits: string[] = [];
    for (const [attempt, seconds] of [
      [1, 1],
      [2, 2],
      [3, 4],
    ] as const) {
      const before = FakeSocket.made.length;
      latest().drop();
      await flush();
      waits.push(banner() ?? '');
      expect(banner()).toBe(`Live updates lost; reconnecting in ${seconds} s (attempt ${attempt}).`);
      await advance(seconds * 1000 - 1);
      expect(FakeSocket.made.length, 'not before its time').toBe(before);
      await advance(1);
      expect(FakeSocket.made.length).toBe(before + 1);
      expect(banner()).toBe('Connecting to live updates…');
    }
    latest().admit();
    await flush();
    expect(banner()).toBeNull();
    latest().drop();
    await flush();
    expect(banner()).toBe('Live updates lost; reconnecting in 1 s (attempt 1).');
  });

  it('waits at most 30 s between attempts', async () => {
    render(<Probe />);
    await flush();
    for (let attempt = 1; attempt <= 7; attempt++) {
      latest().drop();
      await flush();
      await advance(30_000);
    }
    latest().drop();
    await flush();
    expect(banner()).toBe('Live updates lost; reconnecting in 30 s (attempt 8).');
  });

  it('a refused key is said with the server message, and not tried again', async () => {
    render(<Probe />);
    await flush();
    latest().onopen?.({});
    latest().deliver({ type: 'error', code: 'authentication_failed', message: 'Invalid API key' });
    latest().drop(4401, 'Invalid API key');
    await flush();
    expect(banner()).toBe('Live updates unavailable: Invalid API key');
    await advance(120_000);
    expect(FakeSocket.made.length).toBe(1);
  });

  it('hands alert messages to the page, and closes the stream when the page goes', async () => {
    const alerts: AlertMessage[] = [];
    // The page leaves as a page does, unmounted by its parent (the router). (Preact 11 skips effect
    // clean-ups when a root that re-rendered itself is unmounted with render(null), as Testing Library's
    // unmount() does; the console never unmounts its root.)
    let leave = () => {};
    function Router() {
      const [shown, setShown] = useState(true);
      leave = () => setShown(false);
      return shown ? <Probe onAlert={(message) => alerts.push(message)} /> : <p>elsewhere</p>;
    }
    render(<Router />);
    await flush();
    latest().admit();
    await flush();
    latest().deliver({ type: 'alert', event: 'alert.firing', incident_id: 'inc_1', instance_id: 'ins_a' });
    expect(alerts.map((a) => [a.event, a.incident_id])).toEqual([['alert.firing', 'inc_1']]);
    act(() => leave());
    await flush();
    expect(screen.getByText('elsewhere')).toBeTruthy();
    expect(latest().closedByClient).toBe(true);
    latest().drop(1000);
    await advance(60_000);
    expect(FakeSocket.made.length, 'no reconnection after the page went').toBe(1);
  });
});
