/**
 * Issue 2 item 11: the OpenAPI 3.1 document served at /v1/openapi.json is the committed
 * openapi/v1.json, and /docs renders it from files this server serves (no CDN, no other host).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInstance, waitForStatus } from './helpers/instances.js';
import { type Reply, startTestServer, type TestServer } from './helpers/server.js';

const committedFile = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'openapi', 'v1.json');
const committed = JSON.parse(readFileSync(committedFile, 'utf8'));

/** Absolute http(s) URLs in `text` whose origin is not `origin`. */
function foreignUrls(text: string, origin: string): string[] {
  return [...text.matchAll(/https?:\/\/[^\s"'`<>)\\]+/g)]
    .map((match) => match[0])
    .filter((url) => new URL(url).origin !== origin);
}

/** JavaScript without its comments (a comment may cite a web page; it loads nothing). */
function withoutComments(source: string): string {
  return source
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .split('\n')
    .filter((line) => !line.trim().startsWith('//'))
    .join('\n');
}

describe('OpenAPI document and /docs', () => {
  let server: TestServer;
  let origin: string;

  /** GET that follows redirects on this server; returns the final reply and its URL. */
  async function follow(start: string): Promise<{ reply: Reply; url: URL }> {
    let url = new URL(start, server.url);
    for (let hop = 0; hop < 5; hop += 1) {
      const reply = await server.request('GET', `${url.pathname}${url.search}`);
      const location = reply.headers.location;
      if (reply.status < 300 || reply.status >= 400 || !location) return { reply, url };
      url = new URL(location, url);
      expect(url.origin).toBe(origin);
    }
    throw new Error(`too many redirects from ${start}`);
  }

  beforeAll(async () => {
    server = await startTestServer();
    origin = new URL(server.url).origin;
  });
  afterAll(async () => {
    await server?.close();
  });

  it('serves the committed OpenAPI 3.1 document at /v1/openapi.json without a key', async () => {
    const reply = await server.request('GET', '/v1/openapi.json');
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toMatch(/^application\/json/);
    expect(reply.body.openapi).toMatch(/^3\.1\.\d+$/);
    expect(reply.body).toEqual(committed);
  });

  it('documents every route of the foundation, each with a unique operationId', async () => {
    const { body } = await server.request('GET', '/v1/openapi.json');
    const paths = Object.keys(body.paths);
    for (const expected of [
      '/healthz',
      '/readyz',
      '/v1/account',
      '/v1/account/quota',
      '/v1/account/rate-limit',
      '/v1/account/api-keys',
      '/v1/account/api-keys/{id}',
      '/v1/instance-types',
      '/v1/regions',
      '/v1/images',
    ]) {
      expect(paths).toContain(expected);
    }
    expect(Object.keys(body.paths['/v1/account'])).toEqual(expect.arrayContaining(['get', 'patch']));
    expect(Object.keys(body.paths['/v1/account/api-keys'])).toEqual(expect.arrayContaining(['get', 'post']));

    const operations = Object.values(body.paths).flatMap((item) => Object.values(item as object));
    const ids = operations.map((operation) => operation.operationId);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('says which operations need no key', async () => {
    const { body } = await server.request('GET', '/v1/openapi.json');
    expect(body.security).toEqual(expect.arrayContaining([{ bearer: [] }, { apiKey: [] }]));
    expect(body.paths['/healthz'].get.security).toEqual([]);
    expect(body.paths['/v1/account'].get.security).toBeUndefined();
  });

  it('marks a request body optional only where the route accepts none (stop)', async () => {
    const { body } = await server.request('GET', '/v1/openapi.json');
    expect(body.paths['/v1/instances/{id}/stop'].post.requestBody.required).toBe(false);
    expect(body.paths['/v1/instances/{id}/resize'].post.requestBody.required).toBe(true);
    expect(body.paths['/v1/instances'].post.requestBody.required).toBe(true);
    // And the server agrees: a stop without a body is accepted.
    const { id } = await createInstance(server, server.rootKey);
    await waitForStatus(server, server.rootKey, id, 'running');
    const stopped = await server.request('POST', `/v1/instances/${id}/stop`, { key: server.rootKey });
    expect(stopped.status, stopped.text).toBe(202);
  });

  it('renders /docs as HTML whose assets all come from this server', async () => {
    const { reply: page, url: pageUrl } = await follow('/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toMatch(/<div id="swagger-ui">/);
    expect(foreignUrls(page.text, origin)).toEqual([]);
    // Swagger UI's own entry point leads to the same page.
    const { reply: entry } = await follow('/docs/static/index.html');
    expect(entry.status).toBe(200);
    expect(entry.text).toMatch(/<div id="swagger-ui">/);

    const references = [...page.text.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    const assets = references.map((reference) => new URL(reference, pageUrl));
    expect(assets.map((asset) => asset.origin).every((assetOrigin) => assetOrigin === origin)).toBe(true);
    const names = assets.map((asset) => path.posix.basename(asset.pathname));
    expect(names).toEqual(
      expect.arrayContaining(['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-initializer.js']),
    );

    for (const asset of assets) {
      const reply = await server.request('GET', asset.pathname);
      expect(reply.status, asset.pathname).toBe(200);
      expect(reply.text.length, asset.pathname).toBeGreaterThan(0);
      if (asset.pathname.endsWith('.js')) {
        expect(reply.headers['content-type'], asset.pathname).toMatch(/javascript/);
      }
      if (asset.pathname.endsWith('.css')) {
        expect(reply.headers['content-type'], asset.pathname).toMatch(/^text\/css/);
      }
    }
  });

  it('initialises Swagger UI from this server only, with the same document', async () => {
    const { url: pageUrl } = await follow('/docs');
    const initializer = await server.request('GET', '/docs/static/swagger-initializer.js');
    expect(initializer.status).toBe(200);
    const code = withoutComments(initializer.text);
    expect(foreignUrls(code, origin)).toEqual([]);
    expect(code).toMatch(/validatorUrl: null/);

    // The UI loads `./json` relative to the page.
    expect(code).toMatch(/url: resolveUrl\('\.\/json'\)/);
    const documentUrl = new URL('./json', `${pageUrl.href.replace(/\/?$/, '/')}`);
    const document = await server.request('GET', documentUrl.pathname);
    expect(document.status).toBe(200);
    expect(document.body).toEqual(committed);
  });

  it('forbids the docs pages from loading anything from another host', async () => {
    const { reply } = await follow('/docs');
    const policy = String(reply.headers['content-security-policy'] ?? '');
    expect(policy).toMatch(/default-src 'self'/);
    const allowed = new Set(["'self'", "'none'", 'data:']);
    for (const directive of policy.split(';').map((part) => part.trim())) {
      const [name, ...sources] = directive.split(/\s+/);
      if (!name || name === 'upgrade-insecure-requests') continue;
      for (const source of sources) expect(allowed, `${name} ${source}`).toContain(source);
    }
  });
});
