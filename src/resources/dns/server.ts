/**
 * The DNS server's sockets: UDP and TCP on one port (TCP messages framed by a 2-byte length, RFC 1035
 * §4.2.2), each message answered by the DnsResponder. What a sender can make it hold is bounded
 * (docs/api.md, "DNS"): a query from a source over its budget is dropped, not refused (a refusal is
 * still a packet sent to whoever the source address claims to be); a query larger than any question
 * needs is dropped (UDP) or ends its connection (TCP); TCP connections are capped in all and per
 * source, and closed after a few idle seconds; at most `maxInFlight` queries wait for the store at once,
 * and UDP queries beyond that are dropped.
 */
import dgram from 'node:dgram';
import { type AddressInfo, createServer, isIPv6, type Server, type Socket } from 'node:net';
import { type BucketSettings, SourceBuckets, sourceOf } from './source-buckets.js';

export interface DnsServerLimits {
  /** Per source (IPv4 address or IPv6 /64), over UDP and TCP together. */
  rate: BucketSettings;
  /** The largest query accepted: one question with an OPT record needs far less. */
  maxQueryBytes: number;
  maxTcpConnections: number;
  maxTcpConnectionsPerSource: number;
  /** A TCP connection with no complete query for this long is closed (RFC 7766 §6.2.3: seconds). */
  tcpIdleMs: number;
  maxInFlight: number;
}

export const DNS_LIMITS: DnsServerLimits = {
  rate: { perSecond: 100, burst: 200, maxSources: 100_000 },
  maxQueryBytes: 1024,
  maxTcpConnections: 256,
  maxTcpConnectionsPerSource: 8,
  tcpIdleMs: 10_000,
  maxInFlight: 1024,
};

/** What one TCP connection may have sent beyond the query being answered. */
const MAX_PENDING_BYTES = 16 * 1024;

/** What answers a message: the answer's bytes, or null to send nothing. */
export type Answerer = (message: Buffer, transport: 'udp' | 'tcp') => Promise<Buffer | null>;

export class DnsServer {
  private readonly buckets: SourceBuckets;
  private udp: dgram.Socket | null = null;
  private tcp: Server | null = null;
  private readonly connections = new Set<Socket>();
  private readonly connectionsBySource = new Map<string, number>();
  private inFlight = 0;

  constructor(
    private readonly answerer: Answerer,
    /** A socket or a query that failed; the server goes on answering. */
    private readonly onError: (error: unknown) => void,
    private readonly limits: DnsServerLimits = DNS_LIMITS,
  ) {
    this.buckets = new SourceBuckets(limits.rate);
  }

  /**
   * Binds UDP, then TCP on the same port (port 0: the one the system gave UDP) on `host`, whose address
   * family picks the UDP socket's. Resolves to the port.
   */
  async listen(port: number, host: string): Promise<number> {
    // With port 0 the system picks a free UDP port, which some TCP socket may already hold; pick again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.bindBoth(port, host);
      } catch (error) {
        const taken = (error as NodeJS.ErrnoException).code === 'EADDRINUSE';
        if (port !== 0 || !taken || attempt === 10) throw error;
      }
    }
  }

  private async bindBoth(port: number, host: string): Promise<number> {
    const udp = dgram.createSocket({ type: isIPv6(host) ? 'udp6' : 'udp4' });
    udp.on('message', (message, remote) => this.onDatagram(udp, message, remote));
    // A datagram's ICMP error or a send to a vanished client is that client's problem, not the server's.
    udp.on('error', this.onError);
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(port, host, () => {
        udp.off('error', reject);
        resolve();
      });
    });
    this.udp = udp;
    const bound = udp.address().port;
    const tcp = createServer({ noDelay: true }, (socket) => this.onConnection(socket));
    tcp.maxConnections = this.limits.maxTcpConnections;
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(bound, host, () => {
        tcp.off('error', reject);
        resolve();
      });
    }).catch(async (error) => {
      await this.close();
      throw error;
    });
    tcp.on('error', this.onError);
    this.tcp = tcp;
    return (tcp.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    const { udp, tcp } = this;
    this.udp = null;
    this.tcp = null;
    for (const socket of this.connections) socket.destroy();
    await Promise.all([
      udp ? new Promise<void>((resolve) => udp.close(() => resolve())) : undefined,
      tcp ? new Promise<void>((resolve) => tcp.close(() => resolve())) : undefined,
    ]);
  }

  /** What the server holds now: the fuzz suite checks that hostile traffic leaves it bounded. */
  get holding(): { tcpConnections: number; inFlight: number; sources: number } {
    return { tcpConnections: this.connections.size, inFlight: this.inFlight, sources: this.buckets.size };
  }

  private onDatagram(udp: dgram.Socket, message: Buffer, remote: dgram.RemoteInfo): void {
    if (message.length > this.limits.maxQueryBytes || this.inFlight >= this.limits.maxInFlight) return;
    if (!this.buckets.take(remote.address)) return;
    void this.respond(message, 'udp').then((answer) => {
      if (!answer || this.udp !== udp) return;
      // An answer that cannot be sent (a forged source: port 0 throws; an unreachable one fails later) is
      // the sender's loss, and logging each would let a flood of them fill the log.
      try {
        udp.send(answer, remote.port, remote.address, () => {});
      } catch {}
    });
  }

  private onConnection(socket: Socket): void {
    const source = sourceOf(socket.remoteAddress ?? '');
    const held = this.connectionsBySource.get(source) ?? 0;
    if (held >= this.limits.maxTcpConnectionsPerSource || this.tcp === null) {
      socket.destroy();
      return;
    }
    this.connections.add(socket);
    this.connectionsBySource.set(source, held + 1);
    socket.once('close', () => {
      this.connections.delete(socket);
      const left = (this.connectionsBySource.get(source) ?? 1) - 1;
      if (left > 0) this.connectionsBySource.set(source, left);
      else this.connectionsBySource.delete(source);
    });
    socket.on('error', () => {});
    socket.setTimeout(this.limits.tcpIdleMs, () => socket.destroy());

    // Queries on one connection are answered one at a time, in order; while one waits for the store the
    // socket is paused, so a client that pipelines fills its own send buffer, not the server's memory.
    let pending: Buffer = Buffer.alloc(0);
    const next = async (): Promise<void> => {
      while (pending.length >= 2) {
        const length = pending.readUInt16BE(0);
        if (length === 0 || length > this.limits.maxQueryBytes) {
          socket.destroy();
          return;
        }
        if (pending.length < 2 + length) return;
        const message = Buffer.from(pending.subarray(2, 2 + length));
        pending = pending.subarray(2 + length);
        if (!this.buckets.take(socket.remoteAddress ?? '')) continue;
        socket.pause();
        const answer = await this.respond(message, 'tcp');
        if (socket.destroyed) return;
        if (answer) {
          const framed = Buffer.alloc(2 + answer.length);
          framed.writeUInt16BE(answer.length, 0);
          answer.copy(framed, 2);
          socket.write(framed);
        }
        socket.resume();
      }
    };
    let running: Promise<void> = Promise.resolve();
    socket.on('data', (chunk: Buffer) => {
      // A pipelining client waits on its own send buffer while the socket is paused; this is the most it
      // can have sent before that (a longer query was refused above).
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      if (pending.length > MAX_PENDING_BYTES) {
        socket.destroy();
        return;
      }
      running = running.then(next).catch((error: unknown) => {
        this.onError(error);
        socket.destroy();
      });
    });
  }

  private async respond(message: Buffer, transport: 'udp' | 'tcp'): Promise<Buffer | null> {
    this.inFlight += 1;
    try {
      return await this.answerer(message, transport);
    } catch (error) {
      this.onError(error);
      return null;
    } finally {
      this.inFlight -= 1;
    }
  }
}
