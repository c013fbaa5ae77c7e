/**
 * Issue 2 item 11: the OpenAPI 3.1 document served at /v1/openapi.json is the committed
 * openapi/v1.json, and /docs renders it from files this server serves (no CDN, no other host).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TAGS } from '../src/platform/http/openapi.js';
import { STORES } from './helpers/backends.js';
import { createInstance, waitForStatus } from './helpers/instances.js';
import { contractProblems } from './helpers/openapi-contract.js';
import { dereferenced } from './helpers/openapi-document.js';
import { type Reply, serverForSuite, startTestServer, type TestServer } from './helpers/server.js';

const committedFile = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'openapi', 'v1.json');
const committed = JSON.parse(readFileSync(committedFile, 'utf8'));
/** The document with every `$ref` followed: what each operation says, wherever the part is written. */
const inline = dereferenced(committed);

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
    // The bodies are shared components (each written once for /v1 and /v2): read them through the `$ref`.
    const served = dereferenced(body);
    expect(served.paths['/v1/instances/{id}/stop'].post.requestBody.required).toBe(false);
    expect(served.paths['/v1/instances/{id}/resize'].post.requestBody.required).toBe(true);
    expect(served.paths['/v1/instances'].post.requestBody.required).toBe(true);
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

type Operation = {
  summary?: string;
  description?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: { in: string; name: string; required?: boolean; schema?: { default?: unknown } }[];
  requestBody?: { content: Record<string, { example?: unknown }> };
  responses: Record<string, { headers?: Record<string, { required?: boolean }> }>;
};

const operations: { method: string; path: string; operation: Operation }[] = Object.entries(
  inline.paths as Record<string, Record<string, Operation>>,
).flatMap(([pathName, item]) =>
  Object.entries(item).map(([method, operation]) => ({ method, path: pathName, operation })),
);

describe('the OpenAPI document as a contract (issue 20 item 7)', () => {
  it('describes every operation: summary, description, defined tags; and defines only tags in use', () => {
    const defined = new Set((committed.tags as { name: string }[]).map((tag) => tag.name));
    const used = new Set<string>();
    for (const { method, path: pathName, operation } of operations) {
      const where = `${method} ${pathName}`;
      expect(operation.summary, where).toMatch(/\S/);
      expect(operation.description, where).toMatch(/\S/);
      expect(operation.tags?.length, where).toBeGreaterThan(0);
      for (const tag of operation.tags ?? []) {
        expect(defined, `${where} tag ${tag}`).toContain(tag);
        used.add(tag);
      }
    }
    expect([...defined].sort()).toEqual([...used].sort());
  });

  it('names in info.description only areas some operation serves as served', () => {
    const description: string = committed.info.description;
    const [served] = description.split(';');
    for (const tag of TAGS) {
      const inUse = operations.some(({ operation }) => operation.tags?.includes(tag.name));
      expect(served!.includes(tag.area), `${tag.name} is ${inUse ? 'served' : 'not served'}`).toBe(inUse);
    }
  });

  it('marks no query parameter with a default as required (page, limit, sort, order)', () => {
    for (const { method, path: pathName, operation } of operations) {
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== 'query') continue;
        if (parameter.schema && 'default' in parameter.schema) {
          expect(parameter.required, `${method} ${pathName} ?${parameter.name}`).toBe(false);
        }
        if (['page', 'limit', 'sort', 'order'].includes(parameter.name)) {
          expect(parameter.required, `${method} ${pathName} ?${parameter.name}`).toBe(false);
        }
      }
    }
  });

  it('lists each error status an operation can answer, never a range, with the headers every answer carries', () => {
    for (const { method, path: pathName, operation } of operations) {
      const where = `${method.toUpperCase()} ${pathName}`;
      const statuses = Object.keys(operation.responses);
      expect(
        statuses.filter((status) => !/^\d{3}$/.test(status)),
        where,
      ).toEqual([]);
      const isPublic = Array.isArray(operation.security) && operation.security.length === 0;
      const expected = ['400', '408', '429', '431', '500', '503'];
      if (!isPublic) expected.push('401', '403');
      if (pathName.includes('{') && !isPublic) expected.push('404');
      if (['post', 'put', 'patch', 'delete'].includes(method)) expected.push('413');
      if (!isPublic && method === 'post') expected.push('409', '422');
      expect(statuses, where).toEqual(expect.arrayContaining(expected));
      expect(
        statuses.some((status) => status.startsWith('2')),
        where,
      ).toBe(true);

      for (const [status, response] of Object.entries(operation.responses)) {
        const headers = response.headers ?? {};
        expect(headers['X-Request-Id']?.required, `${where} ${status} X-Request-Id`).toBe(true);
        if (status === '429') expect(headers['Retry-After']?.required, `${where} 429 Retry-After`).toBe(true);
        if (!isPublic) {
          for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) {
            expect(headers[name], `${where} ${status} ${name}`).toBeDefined();
            if (status.startsWith('2'))
              expect(headers[name]!.required, `${where} ${status} ${name}`).toBe(true);
          }
        }
        if (!isPublic && method === 'post' && !status.startsWith('5')) {
          expect(headers['Idempotent-Replayed'], `${where} ${status} Idempotent-Replayed`).toBeDefined();
        }
      }
      if (!isPublic && method === 'post') {
        const header = operation.parameters?.find((parameter) => parameter.name === 'Idempotency-Key');
        expect(header, `${where} Idempotency-Key`).toMatchObject({ in: 'header', required: false });
      }
    }
  });

  it('shows an example body on every create, and does not promise a key on an API-key creation', () => {
    const creates = operations.filter(
      ({ method, path: pathName }) => method === 'post' && !pathName.includes('{'),
    );
    expect(creates.length).toBeGreaterThan(2);
    for (const { path: pathName, operation } of creates) {
      expect(operation.requestBody?.content['application/json']?.example, pathName).toBeDefined();
    }
    const created =
      inline.paths['/v1/account/api-keys'].post.responses['201'].content['application/json'].schema;
    const data = created.properties.data;
    expect(data.properties.key).toBeDefined();
    expect(data.required).not.toContain('key');
  });
});

/**
 * Suites that talk to the server below HTTP requests a client library would send, so their answers
 * cannot go through sendRequest (and its contract check); any other suite must.
 */
const BELOW_HTTP: Record<string, string> = {
  'test/api-document-serving.test.ts': 'compressed answers, read as bytes rather than text',
  'test/edge-answers.test.ts':
    'bodies trickled a byte at a time, connections held open to reach a cap, raw upgrades and refusals',
  'test/errors.test.ts': "a request line Node's client refuses to send",
  'test/hardening.test.ts': 'malformed request lines and oversized headers over a bare TLS socket',
  'test/helpers/raw-tls.ts': 'the bare TLS socket the hardening suite uses',
  'test/operations.test.ts': 'keep-alive, idle timeouts and draining, seen on the connection',
  'test/operator-ports.test.ts':
    'the metrics and metadata ports, which are not the API the document describes',
  'test/tls.test.ts': 'the TLS handshake itself',
  'test/helpers/dns.ts': 'DNS over TCP to the DNS server, which is not the API the document describes',
  'test/dns-hardening.test.ts': 'hostile DNS streams over TCP to the DNS server',
  'test/helpers/ovn.ts': "TCP probes between the suite's network namespaces, not to the API",
  'test/ovn-firewall.test.ts': "TCP probes through OVN's firewall between the suite's namespaces",
};

describe('the contract check on every answer (test/helpers/openapi-contract.ts)', () => {
  it("is where every suite's requests go: no suite asks the server another way unless it must", () => {
    const root = path.resolve(path.dirname(committedFile), '..');
    const files = [
      ...readdirSync(path.join(root, 'test'), { recursive: true, encoding: 'utf8' }).map(
        (file) => `test/${file}`,
      ),
      ...readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' })
        .filter((file) => file.endsWith('.test.ts'))
        .map((file) => `src/${file}`),
    ].filter((file) => file.endsWith('.ts') && file !== 'test/helpers/server.ts');
    const otherWays = /\bhttps?\.request\(|\bfetch\(|\.inject\(|\btls\.connect\(|\bnet\.connect\(/;
    const bypassing = files.filter((file) => otherWays.test(readFileSync(path.join(root, file), 'utf8')));
    // The search does find a suite that must go below HTTP, so an empty result is not a vacuous pass.
    expect(bypassing).toContain('test/operations.test.ts');
    expect(
      bypassing.filter((file) => !(file in BELOW_HTTP)),
      'use server.request (or sendRequest), which checks every answer against openapi/v1.json',
    ).toEqual([]);
  });

  const ok = (data: unknown) => ({
    success: true,
    data,
    metadata: { request_id: 'req_x', timestamp: '2026-01-01T00:00:00.000Z' },
  });
  const headers = {
    'content-type': 'application/json; charset=utf-8',
    'x-request-id': 'req_x',
    'x-ratelimit-limit': '1000',
    'x-ratelimit-remaining': '999',
    'x-ratelimit-reset': '1800000000',
  };
  const reply = (status: number, body: unknown, replyHeaders: Record<string, string> = headers) => ({
    status,
    headers: replyHeaders,
    body,
    text: JSON.stringify(body),
  });
  const quota = [{ name: 'instances', limit: 5, used: 0 }];

  it('accepts an answer the document describes', () => {
    expect(contractProblems('GET', '/v1/account/quota', reply(200, ok(quota)))).toEqual([]);
    expect(contractProblems('GET', '/v1/account/quota/', reply(200, ok(quota)))).toEqual([]);
  });

  it('refuses a status the operation does not list', () => {
    expect(contractProblems('GET', '/v1/account/quota', reply(418, ok(quota))).join()).toMatch(/418/);
  });

  it('refuses a body its schema does not accept', () => {
    const wrong = [{ name: 'instances', limit: '5', used: 0 }];
    expect(contractProblems('GET', '/v1/account/quota', reply(200, ok(wrong))).join()).toMatch(/limit/);
  });

  it('refuses an answer without a header the document marks required, or with one of the wrong shape', () => {
    const { 'x-ratelimit-limit': _dropped, ...withoutLimit } = headers;
    expect(contractProblems('GET', '/v1/account/quota', reply(200, ok(quota), withoutLimit)).join()).toMatch(
      /X-RateLimit-Limit/,
    );
    expect(
      contractProblems(
        'GET',
        '/v1/account/quota',
        reply(200, ok(quota), { ...headers, 'x-ratelimit-reset': 'soon' }),
      ).join(),
    ).toMatch(/X-RateLimit-Reset/);
  });

  it('holds unknown paths and methods to the error envelope', () => {
    const notFound = {
      success: false,
      error: { code: 'not_found', message: 'No such endpoint' },
      metadata: { request_id: 'req_x', timestamp: '2026-01-01T00:00:00.000Z' },
    };
    expect(contractProblems('GET', '/v1/nowhere', reply(404, notFound))).toEqual([]);
    expect(contractProblems('PUT', '/v1/account', reply(405, notFound))).toEqual([]);
    expect(contractProblems('GET', '/v1/nowhere', reply(404, 'Not Found')).join()).toMatch(/envelope/);
    expect(contractProblems('GET', '/v1/nowhere', reply(200, ok({}))).join()).toMatch(/not an error/);
  });
});

describe.each(STORES)('the document against the server (%s)', (store) => {
  // The alert policy's example has an e-mail channel, which a server without an SMTP relay refuses;
  // creating a policy sends nothing, so a relay that is never reached is enough here.
  const server = serverForSuite({ store, env: { NIMBUS_SMTP_URL: 'smtp://127.0.0.1:2' } });

  it('accepts the example body of every create', async () => {
    const creates = operations.filter(
      ({ method, path: pathName }) => method === 'post' && !pathName.includes('{'),
    );
    // One account per API version: /v2 repeats /v1's creates, and names must be unique per account.
    const keys = new Map<string, string>();
    for (const { path: pathName, operation } of creates) {
      const version = pathName.split('/')[1] as string;
      if (!keys.has(version)) keys.set(version, (await server.createAccount({ plan: 'enterprise' })).key);
      const key = keys.get(version);
      const body = operation.requestBody!.content['application/json']!.example;
      const created = await server.request('POST', pathName, { key, body });
      // A receiver URL in an example names a host on the internet, which this machine cannot resolve:
      // there the example may fail on that field alone.
      const offline = created.status === 400 && created.body.error.details?.field === 'url';
      // An example that names another resource by id (the volume a snapshot copies) names one this new
      // account does not have: there it may fail as not found, naming that field, and on nothing else.
      const dangling = created.status === 404 && created.body.error.details?.field !== undefined;
      if (offline || dangling) continue;
      expect(created.status, `${pathName}: ${created.text}`).toBeGreaterThanOrEqual(200);
      expect(created.status, `${pathName}: ${created.text}`).toBeLessThan(300);
    }
  });

  it('describes the replay of an API-key creation, which leaves the key out', async () => {
    const { key } = await server.createAccount();
    const options = { key, body: { name: 'replayed' }, headers: { 'idempotency-key': 'openapi-replay' } };
    const first = await server.request('POST', '/v1/account/api-keys', options);
    expect(first.status).toBe(201);
    expect(first.body.data.key).toMatch(/^nmb_/);
    // sendRequest checks both answers against the document: before `key` was optional there, this failed.
    const replay = await server.request('POST', '/v1/account/api-keys', options);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data.id).toBe(first.body.data.id);
    expect(replay.body.data).not.toHaveProperty('key');
    const url = new URL('/v1/account/api-keys', server.url);
    expect(contractProblems('POST', url.pathname, replay)).toEqual([]);
  });

  it('holds a deliberately broken request to the document too: its refusal is a documented status', async () => {
    const broken = await server.request('POST', '/v1/instances', {
      key: server.rootKey,
      rawBody: '{"name": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(broken.status).toBe(400);
    expect(committed.paths['/v1/instances'].post.responses['400']).toBeDefined();
  });
});
