/**
 * A large document that never changes while the process runs (the OpenAPI document: 2 MB of JSON),
 * served from memory: serialised once on first use, compressed once per encoding a client asks for
 * (br, gzip; identity otherwise), with a strong ETag per encoding (a `304` for `If-None-Match`) and
 * `Cache-Control`. Serialising it per request cost about 38 ms of CPU, which keyless clients could make
 * the server spend at will (issue 29).
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';

const gzip = promisify(zlib.gzip);
const brotli = promisify(zlib.brotliCompress);

export type ContentCoding = 'br' | 'gzip' | 'identity';

/** Preferred first: brotli is about a fifth smaller than gzip on this JSON. */
const PREFERENCE: readonly ContentCoding[] = ['br', 'gzip', 'identity'];

/**
 * The coding to answer with, from an Accept-Encoding header (RFC 9110 §12.5.3): the most preferred one
 * the client accepts with q > 0, by name or through `*`; identity when none is (or no header came).
 */
export function chooseCoding(acceptEncoding: string | undefined): ContentCoding {
  if (!acceptEncoding) return 'identity';
  const weights = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name = '', ...parameters] = part.split(';').map((piece) => piece.trim().toLowerCase());
    if (name === '') continue;
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    weights.set(name, Number.isFinite(weight) ? weight : 0);
  }
  const wildcard = weights.get('*');
  for (const coding of PREFERENCE) {
    const weight = weights.get(coding) ?? (coding === 'identity' ? undefined : wildcard);
    if (weight !== undefined && weight > 0) return coding;
  }
  return 'identity';
}

/** True when an If-None-Match header names one of `tags` (weak comparison, as RFC 9110 §13.1.2 says). */
export function matchesAny(ifNoneMatch: string | undefined, tags: readonly string[]): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch
    .split(',')
    .map((tag) => tag.trim().replace(/^W\//, ''))
    .some((tag) => tags.includes(tag));
}

export interface CachedDocumentOptions {
  contentType: string;
  cacheControl: string;
}

export class CachedDocument {
  private identity: { body: Buffer; tag: string } | null = null;
  private readonly encoded = new Map<ContentCoding, Promise<Buffer>>();

  constructor(
    private readonly produce: () => string,
    private readonly options: CachedDocumentOptions,
  ) {}

  /** The document as sent without compression, and its digest: made on first use. */
  private plain(): { body: Buffer; tag: string } {
    if (this.identity === null) {
      const body = Buffer.from(this.produce());
      this.identity = { body, tag: createHash('sha256').update(body).digest('base64url').slice(0, 32) };
    }
    return this.identity;
  }

  /** A strong validator per representation: the same bytes under another coding are another one. */
  private etag(coding: ContentCoding): string {
    const { tag } = this.plain();
    return coding === 'identity' ? `"${tag}"` : `"${tag}-${coding}"`;
  }

  /** Each coding is compressed once, off the event loop (zlib's thread pool); later asks share it. */
  private body(coding: ContentCoding): Buffer | Promise<Buffer> {
    const plain = this.plain().body;
    if (coding === 'identity') return plain;
    let pending = this.encoded.get(coding);
    if (pending === undefined) {
      pending =
        coding === 'br'
          ? brotli(plain, {
              params: {
                [zlib.constants.BROTLI_PARAM_QUALITY]: 9,
                [zlib.constants.BROTLI_PARAM_SIZE_HINT]: plain.length,
              },
            })
          : gzip(plain, { level: 9 });
      // A failed compression is not kept: the next request tries again.
      pending.catch(() => this.encoded.delete(coding));
      this.encoded.set(coding, pending);
    }
    return pending;
  }

  async send(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const coding = chooseCoding(request.headers['accept-encoding']);
    reply
      .header('etag', this.etag(coding))
      .header('cache-control', this.options.cacheControl)
      .header('vary', 'accept-encoding');
    const known = PREFERENCE.map((each) => this.etag(each));
    if (matchesAny(request.headers['if-none-match'], known)) return reply.code(304).send();
    const body = await this.body(coding);
    if (coding !== 'identity') reply.header('content-encoding', coding);
    return reply.type(this.options.contentType).send(body);
  }
}
