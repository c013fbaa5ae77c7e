/**
 * The stream service's memory bound and liveness, with a socket that never drains: however long a client
 * stops reading, what the server holds for it stays under the send bound, the samples it missed are
 * counted, and the count arrives with the next message once it reads again. A peer that stops answering
 * pings is dropped.
 */
import { describe, expect, it } from 'vitest';
import type { ComputeDriver, MachineSpec } from '../../drivers/driver.js';
import { simulatedSample } from '../../drivers/simulator/metrics.js';
import { ManualClock } from '../../platform/domain/clock.js';
import { LocalBroadcaster } from '../../platform/events/broadcast.js';
import type { Principal } from '../../platform/principal.js';
import type { RateLimitService } from '../../platform/rate-limits/rate-limits.js';
import type { Store } from '../../platform/store/db.js';
import type { ApiKeyService } from '../account/api-key-service.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import { MetricsStreams, PHASE_MS, PHASES, phaseOf, type StreamSocket } from './streams.js';

/** A socket whose peer never reads: everything sent stays buffered until `drain()`. */
class StuckSocket implements StreamSocket {
  buffered = 0;
  sent: string[] = [];
  pings = 0;
  terminated = false;
  closedWith: number | null = null;
  send(text: string | Buffer): void {
    this.sent.push(text.toString());
    this.buffered += Buffer.byteLength(text);
  }
  bufferedAmount(): number {
    return this.buffered;
  }
  close(code: number): void {
    this.closedWith = code;
  }
  ping(): void {
    this.pings += 1;
  }
  terminate(): void {
    this.terminated = true;
  }
  drain(): void {
    this.buffered = 0;
  }
}

const principal = {
  accountId: 'acct_1',
  permissions: ['*'],
  accountStatus: 'active',
} as unknown as Principal;

function hub(clock: ManualClock) {
  const driver = {
    sampleMetrics: async (spec: MachineSpec, at: Date) => simulatedSample(spec, at, true),
  } as unknown as ComputeDriver;
  return new MetricsStreams(
    {} as Store,
    clock,
    driver,
    { authenticate: async () => principal } as unknown as ApiKeyService,
    { decide: async () => ({ allowed: true }) } as unknown as RateLimitService,
    new LocalBroadcaster(),
    { maxStreamsPerAccount: 10 },
  );
}

/** An account-wide stream watching `count` running instances at 1 s. */
async function watching(streams: MetricsStreams, socket: StreamSocket, count: number) {
  const session = streams.open(socket, { account: true }, 'nmb_key', '127.0.0.1');
  await new Promise((resolve) => setTimeout(resolve, 10));
  for (let i = 0; i < count; i++) {
    const spec: MachineSpec = {
      id: `ins_${i}`,
      instanceType: instanceTypeNamed('gpu-1x'),
      image: 'ubuntu-22.04-cuda',
      region: 'us-east-1',
      userData: null,
      tags: {},
    };
    session.watched.set(spec.id, {
      spec,
      available: [],
      phase: phaseOf(spec.id),
      status: 'running',
      readAt: '',
    });
  }
  session.intervalS = 1;
  streams.attach(session);
  return session;
}

describe('metric streams', () => {
  it('a client that never reads costs a bounded buffer; missed samples are counted and reported', async () => {
    const clock = new ManualClock(new Date('2026-03-02T12:00:00Z'));
    const streams = hub(clock);
    const socket = new StuckSocket();
    await watching(streams, socket, 100);
    /** One second: a tick in each of its slots. */
    const second = async () => {
      for (let slot = 0; slot < PHASES; slot++) {
        clock.advance(PHASE_MS);
        await streams.tick();
      }
    };
    let peak = 0;
    for (let s = 0; s < 600; s++) {
      await second();
      peak = Math.max(peak, socket.buffered);
    }
    const largest = Math.max(...socket.sent.map((m) => Buffer.byteLength(m)));
    // 600 s × 100 instances were due; the socket holds at most the bound plus one message.
    expect(peak).toBeLessThanOrEqual(64 * 1024 + largest);
    const delivered = socket.sent.filter((m) => JSON.parse(m).type === 'metrics').length;
    expect(delivered).toBeLessThan(600);
    socket.drain();
    const before = socket.sent.length;
    await second();
    const next = socket.sent.slice(before).map((m) => JSON.parse(m));
    expect(next).toHaveLength(100);
    expect(next[0].type).toBe('metrics');
    expect(next[0].dropped).toBe(600 * 100 - delivered);
    // Once reported, the count starts again.
    expect(next[1]).not.toHaveProperty('dropped');
  });

  it('spreads instances over the slots of the second: each instance in its own slot, every second', async () => {
    const clock = new ManualClock(new Date('2026-03-02T12:00:00Z'));
    const streams = hub(clock);
    const socket = new StuckSocket();
    await watching(streams, socket, 100);
    const slots = new Map<string, Set<number>>();
    for (let slot = 0; slot < 3 * PHASES; slot++) {
      clock.advance(PHASE_MS);
      const before = socket.sent.length;
      await streams.tick();
      socket.drain();
      for (const text of socket.sent.slice(before)) {
        const message = JSON.parse(text);
        // The message's time is the slot's, and the slot is the instance's.
        expect(Date.parse(message.timestamp)).toBe(clock.nowMs());
        expect((clock.nowMs() % 1_000) / PHASE_MS).toBe(phaseOf(message.instance_id));
        slots.set(message.instance_id, (slots.get(message.instance_id) ?? new Set()).add(slot % PHASES));
      }
    }
    expect(socket.sent.filter((text) => JSON.parse(text).type === 'metrics')).toHaveLength(300);
    expect([...slots.values()].every((set) => set.size === 1)).toBe(true);
    // Spread: no slot holds more than a quarter of the instances.
    const perSlot = Array.from(
      { length: PHASES },
      (_, p) => [...slots.values()].filter((set) => set.has(p)).length,
    );
    expect(Math.max(...perSlot)).toBeLessThan(25);
  });

  it('pings every socket; one that has not answered the previous ping is dropped', async () => {
    const clock = new ManualClock();
    const streams = hub(clock);
    const answering = new StuckSocket();
    const silent = new StuckSocket();
    const live = await watching(streams, answering, 1);
    await watching(streams, silent, 1);
    const pingAll = () => (streams as unknown as { pingAll(): void }).pingAll();
    pingAll();
    expect([answering.pings, silent.pings]).toEqual([1, 1]);
    live.pong();
    pingAll();
    expect(answering.terminated).toBe(false);
    expect(silent.terminated).toBe(true);
    expect(streams.openStreams).toBe(1);
  });
});
