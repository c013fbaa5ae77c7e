/**
 * One DNS message in, its answer out (docs/api.md, "DNS"): authoritative (AA=1) for the zones `Zones`
 * names, never recursive (RA=0, REFUSED outside them), every answer read from the store when it is asked
 * (resources/dns/store.ts), so it follows an instance's address within the 2 s the API promises.
 *
 * dns-packet reads and writes the wire format; what this file adds is what a hostile sender may not
 * change: a message too short to answer, or that is itself an answer, gets nothing; one that is not a
 * plain query of one question gets FORMERR or NOTIMP, and the question is echoed only when it encodes
 * back to the very bytes that were sent.
 */
import dnsPacket, { type Answer, type DecodedPacket, type Packet, type Question } from 'dns-packet';
import type { Kysely } from 'kysely';
import type { Database } from '../../platform/store/schema.js';
import { instanceByAddress, instanceById, instanceByUniqueName, type NamedInstance } from './store.js';
import { type Place, Zones } from './zone.js';

/** Seconds resolvers may keep an answer, and a negative one (SOA minimum): an address moves in minutes. */
export const TTL_SECONDS = 60;
/** What a UDP answer may fill when the query says nothing (RFC 1035) … */
const CLASSIC_UDP_BYTES = 512;
/** … and at most, whatever EDNS asks for: the size that avoids IP fragmentation (DNS flag day 2020). */
const EDNS_UDP_BYTES = 1232;
const HEADER_BYTES = 12;
const QR = 1 << 15;

const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
/** EDNS version not understood: 16, whose upper bits travel in the OPT record (RFC 6891). */
const BADVERS_UPPER = 1;

export interface ResponderSettings {
  domain: string;
  /** Each region's public IPv4 pool (resources/instances/region-settings.ts). */
  publicIpPools: Readonly<Record<string, string>>;
  /** The address `ns1.<domain>` answers, when the server knows it (NIMBUS_HOST as an IPv4 literal). */
  nameserverAddress: string | null;
  /** Seconds since the epoch, for the SOA serial. */
  now: () => number;
}

interface Reply {
  rcode: number;
  authoritative: boolean;
  answers?: Answer[];
  authorities?: Answer[];
}

export class DnsResponder {
  readonly zones: Zones;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly settings: ResponderSettings,
  ) {
    this.zones = new Zones(settings.domain, settings.publicIpPools);
  }

  /**
   * The answer to `message`, sized for `transport`; null when nothing must be sent back (too short to
   * carry an id, or not a query). A failed store read is SERVFAIL.
   */
  async answer(message: Buffer, transport: 'udp' | 'tcp'): Promise<Buffer | null> {
    if (message.length < HEADER_BYTES || (message.readUInt16BE(2) & QR) !== 0) return null;
    const id = message.readUInt16BE(0);
    const opcode = (message.readUInt16BE(2) >> 11) & 0xf;
    const recursionDesired = message.readUInt16BE(2) & dnsPacket.RECURSION_DESIRED;
    const counts = [4, 6, 8, 10].map((offset) => message.readUInt16BE(offset));
    const bare = (rcode: number) => encode({ id, flags: recursionDesired | (opcode << 11) | rcode });
    if (opcode !== 0) return bare(RCODE.NOTIMP);
    // One question, nothing in the answer or authority sections, and at most an OPT (and a TSIG) after.
    if (counts[0] !== 1 || counts[1] !== 0 || counts[2] !== 0 || (counts[3] ?? 0) > 2) {
      return bare(RCODE.FORMERR);
    }
    let query: DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return bare(RCODE.FORMERR);
    }
    const question = query.questions?.[0];
    if (!question || !echoesExactly(message, question)) return bare(RCODE.FORMERR);
    const opt = query.additionals?.find((record) => record.type === 'OPT');
    const limit =
      transport === 'tcp'
        ? 65_535
        : opt
          ? Math.min(Math.max(opt.udpPayloadSize, CLASSIC_UDP_BYTES), EDNS_UDP_BYTES)
          : CLASSIC_UDP_BYTES;
    const header = { id, questions: [question], flags: recursionDesired };
    if (opt && opt.ednsVersion !== 0) {
      return encode({ ...header, additionals: [optRecord(BADVERS_UPPER)] });
    }

    let reply: Reply;
    try {
      reply = await this.reply(question);
    } catch {
      reply = { rcode: RCODE.SERVFAIL, authoritative: false };
    }
    const flags = header.flags | reply.rcode | (reply.authoritative ? dnsPacket.AUTHORITATIVE_ANSWER : 0);
    const full = encode({
      ...header,
      flags,
      answers: reply.answers ?? [],
      authorities: reply.authorities ?? [],
      additionals: opt ? [optRecord(0)] : [],
    });
    if (full.length <= limit) return full;
    // Too long for this datagram: the client asks again over TCP (RFC 2181 §9).
    return encode({
      ...header,
      flags: flags | dnsPacket.TRUNCATED_RESPONSE,
      additionals: opt ? [optRecord(0)] : [],
    });
  }

  private async reply(question: Question): Promise<Reply> {
    if (question.class !== 'IN') return { rcode: RCODE.REFUSED, authoritative: false };
    // Zone transfers are not offered: the zone is the instances table.
    if (question.type === 'AXFR' || question.type === 'IXFR') {
      return { rcode: RCODE.REFUSED, authoritative: false };
    }
    const place = this.zones.locate(question.name);
    if (place.kind === 'outside') return { rcode: RCODE.REFUSED, authoritative: false };
    const records = await this.recordsAt(place, question.name);
    if (records === null) return this.negative(place.zone, RCODE.NXDOMAIN);
    const wanted = records.filter(
      (record) => (question.type as string) === 'ANY' || record.type === question.type,
    );
    if (wanted.length === 0) return this.negative(place.zone, RCODE.NOERROR);
    return { rcode: RCODE.NOERROR, authoritative: true, answers: wanted };
  }

  /** Every record `name` holds (possibly none: the name exists), or null when it does not exist. */
  private async recordsAt(
    place: Exclude<Place, { kind: 'outside' }>,
    name: string,
  ): Promise<Answer[] | null> {
    switch (place.kind) {
      case 'apex':
      case 'reverse-apex':
        return [this.soa(name), { type: 'NS', name, ttl: TTL_SECONDS, data: this.zones.nameserver }];
      case 'nameserver': {
        const address = this.settings.nameserverAddress;
        return address ? [{ type: 'A', name, ttl: TTL_SECONDS, data: address }] : [];
      }
      case 'region':
        return [];
      case 'instance': {
        const instance =
          place.by === 'id'
            ? await instanceById(this.db, place.region, place.label)
            : await instanceByUniqueName(this.db, place.region, place.label);
        return addressed(instance) ? [{ type: 'A', name, ttl: TTL_SECONDS, data: instance.public_ip }] : null;
      }
      case 'address': {
        const instance = await instanceByAddress(this.db, place.regions, place.address);
        return addressed(instance)
          ? [{ type: 'PTR', name, ttl: TTL_SECONDS, data: this.zones.hostname(instance) }]
          : null;
      }
      case 'absent':
        return null;
    }
  }

  /** NXDOMAIN, or NOERROR with no answer (the name exists without that type): the SOA says how long to remember it. */
  private negative(zone: string, rcode: number): Reply {
    return { rcode, authoritative: true, authorities: [this.soa(zone)] };
  }

  private soa(owner: string): Answer {
    return {
      type: 'SOA',
      name: owner,
      ttl: TTL_SECONDS,
      data: {
        mname: this.zones.nameserver,
        rname: `hostmaster.${this.zones.domain}`,
        // Answers change with every commit and there is no secondary to tell: the clock is as good a serial as any.
        serial: Math.floor(this.settings.now()) >>> 0,
        refresh: 3600,
        retry: 600,
        expire: 86_400,
        minimum: TTL_SECONDS,
      },
    };
  }
}

function addressed(instance: NamedInstance | null): instance is NamedInstance & { public_ip: string } {
  return instance !== null && instance.public_ip !== null;
}

function optRecord(extendedRcode: number): Answer {
  return {
    type: 'OPT',
    name: '.',
    udpPayloadSize: EDNS_UDP_BYTES,
    extendedRcode,
    ednsVersion: 0,
    flags: 0,
    flag_do: false,
    options: [],
  };
}

function encode(packet: Packet): Buffer {
  return dnsPacket.encode({ type: 'response', ...packet });
}

/**
 * Whether the decoded question writes back to the bytes it was read from: a label holding a dot, bytes
 * that are not UTF-8, or a type or class dns-packet has no name for would otherwise be answered for a
 * question nobody asked.
 */
function echoesExactly(message: Buffer, question: Question): boolean {
  let written: Buffer;
  try {
    written = dnsPacket.encode({ questions: [question] });
  } catch {
    return false;
  }
  const length = written.length - HEADER_BYTES;
  return message.subarray(HEADER_BYTES, HEADER_BYTES + length).equals(written.subarray(HEADER_BYTES));
}
