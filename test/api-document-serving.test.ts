/**
 * The API document is served from memory, compressed once, with a strong ETag (304 on If-None-Match)
 * and Cache-Control, and keyless requests for it spend the client address's rate budget like any other
 * keyless request, up to 429 (issue 29 item 1).
 */
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { expectError } from './helpers/common.js';
import { startTestServer } from './helpers/server.js';

/** A fresh server per test: the address budget (burst 50) is per server without Redis. */
async function withServer(test: (server: Awaited<ReturnType<typeof startTestServer>>) => Promise<void>) {
  const server = await startTestServer();
  try {
    await test(server);
  } finally {
    await server.close();
  }
}

function rateHeaders(headers: Record<string, unknown>) {
  return {
    limit: Number(headers['x-ratelimit-limit']),
    remaining: Number(headers['x-ratelimit-remaining']),
    reset: Number(headers['x-ratelimit-reset']),
  };
}

describe('the API document (/v1/openapi.json, /docs/json)', () => {
  it('is one cached representation per encoding, with a strong ETag, Cache-Control and 304s', async () => {
    await withServer(async (server) => {
      const plain = await server.request('GET', '/v1/openapi.json');
      expect(plain.status).toBe(200);
      expect(plain.body.openapi).toBe('3.1.0');
      expect(plain.headers['content-type']).toMatch(/^application\/json/);
      expect(plain.headers['content-encoding']).toBeUndefined();
      const etag = String(plain.headers.etag);
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/); // strong: no W/
      expect(plain.headers['cache-control']).toBe('public, max-age=300');
      expect(plain.headers.vary).toMatch(/accept-encoding/i);

      // The same bytes each time, and the same document under /docs/json.
      const again = await server.request('GET', '/v1/openapi.json');
      expect(again.text).toBe(plain.text);
      expect(again.headers.etag).toBe(etag);
      const docs = await server.request('GET', '/docs/json');
      expect(docs.text).toBe(plain.text);
      expect(docs.headers.etag).toBe(etag);

      for (const [asked, coding, decode] of [
        ['br, gzip', 'br', brotliDecompressSync],
        ['gzip;q=1, br;q=0', 'gzip', gunzipSync],
        ['deflate, *;q=0.5', 'br', brotliDecompressSync],
      ] as const) {
        const compressed = await rawGet(server, '/v1/openapi.json', { 'accept-encoding': asked });
        expect(compressed.status, asked).toBe(200);
        expect(compressed.headers['content-encoding'], asked).toBe(coding);
        expect(compressed.headers.etag, asked).toBe(`"${etag.slice(1, -1)}-${coding}"`);
        expect(compressed.body.length).toBeLessThan(plain.text.length / 5);
        expect(decode(compressed.body).toString('utf8')).toBe(plain.text);
      }
      expect(
        (await rawGet(server, '/v1/openapi.json', { 'accept-encoding': 'identity, br;q=0' })).headers[
          'content-encoding'
        ],
      ).toBeUndefined();

      for (const [path, asked] of [
        ['/v1/openapi.json', etag],
        ['/docs/json', `W/${etag}`],
        ['/v1/openapi.json', `"other", "${etag.slice(1, -1)}-gzip"`],
      ] as const) {
        const notModified = await rawGet(server, path, { 'if-none-match': asked, 'accept-encoding': 'gzip' });
        expect(notModified.status, `${path} ${asked}`).toBe(304);
        expect(notModified.body.length).toBe(0);
        expect(notModified.headers.etag).toBe(`"${etag.slice(1, -1)}-gzip"`);
        expect(notModified.headers['cache-control']).toBe('public, max-age=300');
        expect(rateHeaders(notModified.headers).limit).toBe(1000);
      }
      expect((await rawGet(server, '/v1/openapi.json', { 'if-none-match': '"stale"' })).status).toBe(200);
    });
  });

  it('spends the client address budget when asked without a key, down to 429', async () => {
    await withServer(async (server) => {
      const first = await server.request('GET', '/v1/openapi.json');
      expect(rateHeaders(first.headers)).toMatchObject({ limit: 1000, remaining: 999 });
      const second = await server.request('GET', '/docs/json');
      expect(rateHeaders(second.headers).remaining).toBe(998);
      // A 304 is an answer too: it costs its unit.
      const revalidated = await rawGet(server, '/v1/openapi.json', {
        'if-none-match': String(first.headers.etag),
      });
      expect(rateHeaders(revalidated.headers).remaining).toBe(997);

      // The Free plan's burst is 50 per address: the document stops being served within it.
      let last = first;
      for (let i = 0; i < 60 && last.status !== 429; i++)
        last = await server.request('GET', '/v1/openapi.json');
      const error = expectError(last, 429, 'rate_limit_exceeded');
      expect(error.retry_after).toBeGreaterThan(0);
      expect(last.headers['retry-after']).toBe(String(error.retry_after));
      expect(rateHeaders(last.headers).remaining).toBe(0);
      for (const path of ['/docs/json', '/docs/yaml', '/docs', '/v1/openapi.json']) {
        expectError(await server.request('GET', path), 429, 'rate_limit_exceeded');
      }
      // Another tenant with a key is not affected: its budget is its account's.
      const tenant = await server.createAccount();
      expect((await server.request('GET', '/v1/account', { key: tenant.key })).status).toBe(200);
    });
  });
});

interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** A GET whose body is kept as bytes (a compressed answer is not text). */
async function rawGet(
  server: Awaited<ReturnType<typeof startTestServer>>,
  path: string,
  headers: Record<string, string>,
): Promise<RawReply> {
  const { request } = await import('node:https');
  const { readFileSync } = await import('node:fs');
  const ca = readFileSync(server.running.certFile);
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, server.url), { headers, ca, servername: 'localhost' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}
