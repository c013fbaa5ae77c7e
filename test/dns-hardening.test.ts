/**
 * What a hostile sender can do to the DNS server (docs/api.md, "DNS"): malformed and mutated messages
 * neither crash it nor grow its memory, a source over its budget is dropped, and TCP connections are
 * bounded in number, idle time and message size. The server is the one the module runs
 * (resources/dns/server.ts and responder.ts) over the suite server's store, with the limits each test names.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import dnsPacket from 'dns-packet';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DnsResponder } from '../src/resources/dns/responder.js';
import { DNS_LIMITS, DnsServer, type DnsServerLimits } from '../src/resources/dns/server.js';
import { sleep, waitFor } from './helpers/common.js';
import { type Answer, answerData, ask, query, sendTcp, sendUdp } from './helpers/dns.js';
import { createInstance } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

const DOMAIN = 'cloud.test';
/** For the tests that send more than a source may: the rate limit has its own test. */
const UNLIMITED = { perSecond: 1e9, burst: 1e9, maxSources: 1000 };

v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe('DNS server under hostile input', () => {
  const server = serverForSuite({ env: { NIMBUS_PUBLIC_DOMAIN: DOMAIN } });
  const servers: DnsServer[] = [];
  let responder: DnsResponder;
  let instance: Record<string, any>;
  const errors: unknown[] = [];

  const start = async (limits: Partial<DnsServerLimits> = {}) => {
    const dns = new DnsServer(
      (message, transport) => responder.answer(message, transport),
      (error) => errors.push(error),
      {
        ...DNS_LIMITS,
        ...limits,
      },
    );
    servers.push(dns);
    return { dns, port: await dns.listen(0, '127.0.0.1') };
  };
  /**
   * The question every test ends on: the server still answers it rightly. Asked again as a resolver
   * would, as a question sent over UDP right after thousands waits behind them in the socket's buffer.
   */
  const stillAnswers = async (port: number, transport: 'udp' | 'tcp' = 'udp') => {
    const answer = await waitFor(
      'an answer',
      () => ask(port, { name: instance.hostname }, transport).catch(() => undefined),
      {
        timeoutMs: 10_000,
      },
    );
    expect(answerData(answer)).toEqual([instance.public_ip]);
  };

  beforeAll(async () => {
    responder = new DnsResponder(server.running.backends.store.committedReads, {
      domain: DOMAIN,
      publicIpPools: { 'us-east-1': '203.0.113.0/24' },
      nameserverAddress: null,
      now: () => Date.now() / 1000,
    });
    instance = await createInstance(server, server.rootKey);
  });
  afterAll(async () => {
    for (const dns of servers) await dns.close();
  });

  /** Random bytes, and valid queries with bytes changed, cut short or grown. */
  const hostile = fc.oneof(
    fc.uint8Array({ minLength: 0, maxLength: 600 }).map((bytes) => Buffer.from(bytes)),
    fc
      .tuple(
        fc.constantFrom('A', 'PTR', 'SOA', 'NS', 'ANY', 'TXT'),
        fc.boolean(),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: -20, max: 20 }),
      )
      .map(([type, edns, flips, resize]) => {
        const bytes = Buffer.from(query({ name: `web.us-east-1.${DOMAIN}`, type: type as 'A', edns }));
        for (const [at, value] of flips) bytes[at % bytes.length] = value;
        if (resize < 0) return bytes.subarray(0, Math.max(0, bytes.length + resize));
        return Buffer.concat([bytes, Buffer.alloc(resize, resize)]);
      }),
  );

  it('answers any message with nothing or a well-formed answer carrying its id, and never throws', async () => {
    await fc.assert(
      fc.asyncProperty(hostile, async (message) => {
        const answer = await responder.answer(message, 'udp');
        if (answer === null) return;
        const decoded = dnsPacket.decode(answer);
        expect(decoded.flag_qr).toBe(true);
        expect(decoded.id).toBe(message.readUInt16BE(0));
        expect(answer.length).toBeLessThanOrEqual(512);
      }),
      { numRuns: 3000 },
    );
  });

  it('keeps answering over UDP and TCP after hostile datagrams and streams, holding nothing after', async () => {
    const { dns, port } = await start({ rate: UNLIMITED });
    const messages = fc.sample(hostile, 3000);
    await blast(port, messages.slice(0, 2500));
    await stillAnswers(port);
    // Streams of random bytes, and framed hostile messages, each on its own connection.
    for (const message of messages.slice(2500)) {
      const framed = Buffer.alloc(2 + message.length);
      framed.writeUInt16BE(message.length, 0);
      message.copy(framed, 2);
      await sendTcp(port, Math.random() < 0.5 ? framed : message, 50).catch(() => null);
    }
    await stillAnswers(port, 'tcp');
    await waitFor('every connection to be gone', () => (dns.holding.tcpConnections === 0 ? true : undefined));
    expect(dns.holding.inFlight).toBe(0);
    expect(errors).toEqual([]);
  }, 60_000);

  it('does not grow its heap beyond a bound over many hostile messages', async () => {
    const { port } = await start({ rate: UNLIMITED });
    const batch = fc.sample(hostile, 2000);
    const round = async () => {
      for (const message of batch) await responder.answer(message, 'udp');
      await blast(port, batch.slice(0, 500));
    };
    await round();
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 10; i++) await round();
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    // 25 000 more messages: a leak of even 400 bytes each would pass 10 MB.
    expect(grown).toBeLessThan(10 * 1024 * 1024);
    await stillAnswers(port);
  }, 120_000);

  it('drops what a source asks beyond 100 queries a second (after a burst of 200)', async () => {
    const { port } = await start();
    const socket = dgram.createSocket('udp4');
    let answered = 0;
    socket.on('message', () => {
      answered += 1;
    });
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
    const message = query({ name: instance.hostname });
    const sentAt = Date.now();
    for (let i = 0; i < 500; i++) socket.send(message, port, '127.0.0.1');
    await waitFor('the burst to be answered', () => (answered >= 200 ? true : undefined), {
      timeoutMs: 5000,
    });
    await sleep(300);
    // The bucket refills while the queries wait to be read: what it may have answered by now.
    const elapsed = (Date.now() - sentAt) / 1000;
    socket.close();
    expect(answered).toBeGreaterThanOrEqual(200);
    expect(answered).toBeLessThanOrEqual(200 + Math.ceil(100 * elapsed));
    // A second later the source has its budget back.
    await sleep(1000);
    await stillAnswers(port);
  });

  it('closes TCP connections beyond the per-source cap', async () => {
    const { dns, port } = await start({ maxTcpConnectionsPerSource: 3 });
    const open = await Promise.all([1, 2, 3, 4, 5].map(() => connect(port)));
    const closed = () => open.filter((socket) => socket.closed).length;
    await waitFor('two connections to be closed', () => (closed() === 2 ? true : undefined));
    await sleep(200);
    expect(closed()).toBe(2);
    expect(dns.holding.tcpConnections).toBe(3);
    for (const socket of open) socket.destroy();
    await waitFor('the server to let them go', () => (dns.holding.tcpConnections === 0 ? true : undefined));
  });

  it('closes idle TCP connections, and ones announcing too long a message', async () => {
    const { dns, port } = await start({ tcpIdleMs: 300 });
    const idle = await connect(port);
    const openedAt = Date.now();
    await waitFor('the idle connection to be closed', () => (idle.closed ? true : undefined), {
      timeoutMs: 5000,
    });
    expect(Date.now() - openedAt).toBeGreaterThanOrEqual(250);
    await waitFor('the server to let it go', () => (dns.holding.tcpConnections === 0 ? true : undefined));

    const tooLong = await connect(port);
    tooLong.write(Buffer.from([0xff, 0xff, 1, 2, 3]));
    await waitFor('the connection to be closed', () => (tooLong.closed ? true : undefined), {
      timeoutMs: 2000,
    });
    // An oversized datagram gets nothing.
    expect(await sendUdp(port, Buffer.concat([query({ name: DOMAIN }), Buffer.alloc(2000)]), 300)).toBeNull();
    await stillAnswers(port, 'tcp');
  });

  it('answers pipelined queries on one TCP connection in order', async () => {
    const { port } = await start();
    const socket = await connect(port);
    const names = [instance.hostname, DOMAIN, `nothing.us-east-1.${DOMAIN}`];
    const messages = names.map((name) => query({ name }));
    socket.write(
      Buffer.concat(
        messages.map((message) => {
          const framed = Buffer.alloc(2 + message.length);
          framed.writeUInt16BE(message.length, 0);
          message.copy(framed, 2);
          return framed;
        }),
      ),
    );
    let received = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
    });
    const answers = await waitFor('three answers', () => {
      const decoded = [];
      let at = 0;
      while (received.length >= at + 2 && received.length >= at + 2 + received.readUInt16BE(at)) {
        decoded.push(
          dnsPacket.decode(received.subarray(at + 2, at + 2 + received.readUInt16BE(at))) as Answer,
        );
        at += 2 + received.readUInt16BE(at);
      }
      return decoded.length === 3 ? decoded : undefined;
    });
    socket.destroy();
    expect(answers.map((answer) => answer.id)).toEqual(messages.map((message) => message.readUInt16BE(0)));
    expect(answers.map((answer) => answer.rcode)).toEqual(['NOERROR', 'NOERROR', 'NXDOMAIN']);
  });
});

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', () => {});
    socket.once('error', reject);
  });
}

/** Sends every message from one socket, then waits a moment for what answers come, and ignores them. */
async function blast(port: number, messages: Buffer[]): Promise<void> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  for (const message of messages) {
    await new Promise<void>((resolve) => socket.send(message, port, '127.0.0.1', () => resolve()));
  }
  await sleep(100);
  socket.close();
}
