/**
 * A DNS client for the suites of the DNS server (src/resources/dns): one question over real UDP or TCP
 * sockets, encoded and decoded with dns-packet, and the same question through `dig` when Debian's
 * bind9-dnsutils is installed (scripts/test-setup.mjs installs it).
 */
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import dnsPacket, { type DecodedPacket, type RecordType } from 'dns-packet';

const setup = (await import(
  pathToFileURL(path.resolve(import.meta.dirname, '..', '..', 'scripts', 'test-setup.mjs')).href
)) as { findProgram: (program: string) => string | null };

/** Whether the `dig` suites run: always under CI=true, where the set-up has installed it (or failed). */
export const USE_DIG = setup.findProgram('dig') !== null || process.env.CI === 'true';

export interface Asked {
  name: string;
  type?: RecordType | 'ANY';
  /** Send an OPT record (EDNS0), as dig and every modern resolver do. */
  edns?: boolean;
}

let nextId = 1;

export function query({ name, type = 'A', edns = false }: Asked): Buffer {
  nextId = (nextId % 65_535) + 1;
  return dnsPacket.encode({
    type: 'query',
    id: nextId,
    flags: dnsPacket.RECURSION_DESIRED,
    questions: [{ name, type: type as RecordType, class: 'IN' }],
    additionals: edns
      ? [
          {
            type: 'OPT',
            name: '.',
            udpPayloadSize: 1232,
            extendedRcode: 0,
            ednsVersion: 0,
            flags: 0,
            flag_do: false,
            options: [],
          },
        ]
      : [],
  });
}

export type Answer = DecodedPacket & { rcode?: string };

/** The data of the answer section's records of `type` (all of them when unnamed). */
export function answerData(answer: Answer, type?: string): unknown[] {
  return (answer.answers ?? [])
    .filter((record) => type === undefined || record.type === type)
    .map((record) => ('data' in record ? record.data : undefined));
}

/** Sends `message` by UDP and resolves to the first answer, or null when none comes within `timeoutMs`. */
export function sendUdp(port: number, message: Buffer, timeoutMs = 2000): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket('udp4');
    const timer = setTimeout(() => finish(null), timeoutMs);
    const finish = (answer: Buffer | null) => {
      clearTimeout(timer);
      socket.close();
      resolve(answer);
    };
    socket.once('message', (answer) => finish(answer));
    socket.once('error', (error) => {
      clearTimeout(timer);
      socket.close();
      reject(error);
    });
    socket.send(message, port, '127.0.0.1');
  });
}

/** Sends `message` framed for TCP on a new connection; resolves to the answer, or null when the server closes first. */
export function sendTcp(port: number, message: Buffer, timeoutMs = 2000): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = Buffer.alloc(0);
    const timer = setTimeout(() => finish(null), timeoutMs);
    const finish = (answer: Buffer | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length >= 2 && received.length >= 2 + received.readUInt16BE(0)) {
        finish(received.subarray(2, 2 + received.readUInt16BE(0)));
      }
    });
    socket.on('close', () => finish(null));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    const framed = Buffer.alloc(2 + message.length);
    framed.writeUInt16BE(message.length, 0);
    message.copy(framed, 2);
    socket.write(framed);
  });
}

/** Asks one question and decodes the answer; fails when none comes. */
export async function ask(port: number, asked: Asked, transport: 'udp' | 'tcp' = 'udp'): Promise<Answer> {
  const message = query(asked);
  const raw = await (transport === 'udp' ? sendUdp(port, message) : sendTcp(port, message));
  if (!raw) throw new Error(`no ${transport} answer to ${asked.type ?? 'A'} ${asked.name}`);
  const answer = dnsPacket.decode(raw) as Answer;
  if (answer.id !== message.readUInt16BE(0)) throw new Error('the answer carries another id');
  return answer;
}

export interface DigAnswer {
  status: string;
  flags: string[];
  /** The answer section's records, as dig prints them: name, ttl, class, type, data. */
  answers: string[][];
  authorities: string[][];
}

/** `dig @127.0.0.1 -p PORT NAME TYPE`, read from its full output. */
export async function dig(
  port: number,
  name: string,
  type: string,
  extra: string[] = [],
): Promise<DigAnswer> {
  const { stdout } = await promisify(execFile)('dig', [
    '@127.0.0.1',
    '-p',
    String(port),
    name,
    type,
    '+tries=1',
    '+time=2',
    ...extra,
  ]);
  const status = /status: ([A-Z]+)/.exec(stdout)?.[1] ?? '';
  const flags = /flags: ([a-z ]+);/.exec(stdout)?.[1]?.trim().split(' ') ?? [];
  const section = (title: string) => {
    const start = stdout.indexOf(`;; ${title} SECTION:`);
    if (start < 0) return [];
    const lines = stdout.slice(start).split('\n').slice(1);
    const end = lines.indexOf('');
    return lines.slice(0, end < 0 ? undefined : end).map((line) => line.split(/\s+/));
  };
  return { status, flags, answers: section('ANSWER'), authorities: section('AUTHORITY') };
}
