/**
 * Sends one webhook request and reports what happened; it decides nothing about retries.
 *
 * - The SSRF rule holds at connect time: host names are resolved by a lookup that refuses a forbidden
 *   address (so a name that changes its answer after the subscription was saved gains nothing), and an
 *   address written in the URL is checked before connecting.
 * - Redirects are not followed (a 3xx is a failed attempt); the answer is read up to 64 KiB; the whole
 *   exchange has 10 s.
 * - One keep-alive connection pool per subscription and origin, each with a bounded number of sockets,
 *   so a slow receiver holds only its own connections, even beside another subscription on the same host.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import https from 'node:https';
import { isIP } from 'node:net';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import {
  DELIVERY_TIMEOUT_MS,
  hostOf,
  isForbiddenAddress,
  RESPONSE_EXCERPT_BYTES,
  RESPONSE_EXCERPT_KEPT_CHARS,
} from './rules.js';

export interface SenderOptions {
  /** Allow receivers on loopback, private and link-local addresses (tests, on-premises). */
  allowPrivate: boolean;
  /** An extra CA (PEM) trusted besides the system's, for receivers with a private certificate. */
  extraCa: string | null;
  /** Connections kept per pool. */
  socketsPerPool?: number;
  timeoutMs?: number;
}

export interface AttemptResult {
  /** The receiver's status code; null when there was no answer. */
  statusCode: number | null;
  /** Why there was no (good) answer, in words. */
  error: string | null;
  /** The start of the answer's body. */
  excerpt: string | null;
  durationMs: number;
}

const MAX_AGENTS = 1_000;

class ForbiddenAddress extends Error {
  readonly code = 'EFORBIDDEN_ADDRESS';
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** dns.lookup, refusing an answer that holds a forbidden address. */
function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const forbidden = addresses.find((a) => isForbiddenAddress(a.address));
    if (forbidden) {
      return callback(
        new ForbiddenAddress(`${hostname} resolves to ${forbidden.address}, which webhooks may not reach`),
        [],
      );
    }
    const first = addresses[0];
    if (options.all) return callback(null, addresses);
    if (!first) return callback(new Error(`${hostname} has no address`), []);
    callback(null, first.address, first.family);
  });
}

export class WebhookSender {
  private readonly agents = new Map<string, https.Agent>();
  /**
   * One TLS context for every connection, made once. Given as `ca` instead, the trusted certificates
   * would be parsed again for each new connection, and Node's agent would join all of their text into
   * its pool key several times per request (measured: most of the worker's CPU time at 1,000 requests/s).
   */
  private readonly secureContext: SecureContext;
  private readonly timeoutMs: number;

  constructor(private readonly options: SenderOptions) {
    this.secureContext = createSecureContext(
      options.extraCa ? { ca: [...rootCertificates, options.extraCa] } : {},
    );
    this.timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  }

  /** POSTs `body` to `target` over the connections of `pool` (the subscription's). */
  send(pool: string, target: string, body: string, headers: Record<string, string>): Promise<AttemptResult> {
    const started = performance.now();
    const done = (result: Omit<AttemptResult, 'durationMs'>): AttemptResult => ({
      ...result,
      durationMs: Math.round(performance.now() - started),
    });
    const url = new URL(target);
    const host = hostOf(url);
    if (!this.options.allowPrivate && isIP(host) !== 0 && isForbiddenAddress(host)) {
      return Promise.resolve(
        done({ statusCode: null, error: `${host} is an address webhooks may not reach`, excerpt: null }),
      );
    }
    return new Promise((resolve) => {
      let settled = false;
      const finish = (result: Omit<AttemptResult, 'durationMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(done(result));
      };
      const request = https.request(
        url,
        {
          method: 'POST',
          agent: this.agentFor(`${pool} ${url.origin}`),
          headers: {
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
            'user-agent': 'Nimbus-Webhooks/1',
            ...headers,
          },
        },
        (response) => {
          const chunks: Buffer[] = [];
          let size = 0;
          const keep = () =>
            Buffer.concat(chunks).toString('utf8').slice(0, RESPONSE_EXCERPT_KEPT_CHARS) || null;
          response.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size <= RESPONSE_EXCERPT_BYTES) chunks.push(chunk);
            else response.destroy();
          });
          const answered = () => {
            const statusCode = response.statusCode ?? null;
            const ok = statusCode !== null && statusCode >= 200 && statusCode < 300;
            finish({ statusCode, error: ok ? null : `The receiver answered ${statusCode}`, excerpt: keep() });
          };
          response.on('end', answered);
          response.on('close', answered);
          response.on('error', answered);
        },
      );
      const timer = setTimeout(() => {
        request.destroy();
        finish({ statusCode: null, error: `No answer within ${this.timeoutMs / 1000} s`, excerpt: null });
      }, this.timeoutMs);
      request.on('error', (error) => finish({ statusCode: null, error: error.message, excerpt: null }));
      request.end(body);
    });
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private agentFor(pool: string): https.Agent {
    let agent = this.agents.get(pool);
    if (!agent) {
      if (this.agents.size >= MAX_AGENTS) this.close();
      agent = new https.Agent({
        keepAlive: true,
        maxSockets: this.options.socketsPerPool ?? 8,
        secureContext: this.secureContext,
        ...(this.options.allowPrivate ? {} : { lookup: guardedLookup as never }),
      });
      this.agents.set(pool, agent);
    }
    return agent;
  }
}
