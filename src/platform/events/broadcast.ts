/**
 * Fan-out of small notices to every replica (cache invalidations now; stream pushes later). In one
 * process it is an EventEmitter; with Redis it is pub/sub, so a notice published by one replica (or by
 * the admin CLI) reaches all of them. Delivery is best effort: subscribers must also cope with a
 * missed notice (the auth cache, for one, expires entries on its own).
 */
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';

export type Notice = Record<string, unknown>;

export interface Broadcaster {
  publish(channel: string, notice: Notice): Promise<void>;
  subscribe(channel: string, handler: (notice: Notice) => void): Promise<void>;
  close(): Promise<void>;
}

export class LocalBroadcaster implements Broadcaster {
  private readonly emitter = new EventEmitter();

  async publish(channel: string, notice: Notice): Promise<void> {
    this.emitter.emit(channel, notice);
  }

  async subscribe(channel: string, handler: (notice: Notice) => void): Promise<void> {
    this.emitter.on(channel, handler);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

export class RedisBroadcaster implements Broadcaster {
  private readonly local = new LocalBroadcaster();
  private subscriber: Redis | undefined;

  /** `publisher` is shared; a subscribing connection is opened on first subscribe (Redis needs its own). */
  constructor(
    private readonly publisher: Redis,
    private readonly prefix = 'nimbus:bc:',
  ) {}

  async publish(channel: string, notice: Notice): Promise<void> {
    await this.publisher.publish(this.prefix + channel, JSON.stringify(notice));
  }

  async subscribe(channel: string, handler: (notice: Notice) => void): Promise<void> {
    if (!this.subscriber) {
      this.subscriber = this.publisher.duplicate();
      this.subscriber.on('message', (fullChannel: string, message: string) => {
        if (!fullChannel.startsWith(this.prefix)) return;
        try {
          void this.local.publish(fullChannel.slice(this.prefix.length), JSON.parse(message) as Notice);
        } catch {
          // A malformed notice is dropped; it cannot have come from Nimbus.
        }
      });
    }
    await this.local.subscribe(channel, handler);
    await this.subscriber.subscribe(this.prefix + channel);
  }

  async close(): Promise<void> {
    await this.local.close();
    if (this.subscriber) this.subscriber.disconnect();
  }
}
