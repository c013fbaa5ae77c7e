/**
 * How the API server serves the web console (src/platform/http/console-routes.ts), over real HTTPS: GET / redirects,
 * deep links answer index.html uncached, hashed assets are cached for a year, every answer carries the
 * strict CSP, nothing needs a key, plain HTTP is still refused, /v1 keeps its 404 envelope and the
 * OpenAPI document does not list these routes. Needs `npm run build` (dist/console).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { CONSOLE_CSP, consoleRoutes } from '../src/platform/http/console-routes.js';
import { sendRequest, serverForSuite } from './helpers/server.js';

describe('web console serving', () => {
  const server = serverForSuite();
  const get = (urlPath: string) => server.request('GET', urlPath, { notApi: true });

  it('redirects / to /console/', async () => {
    const reply = await get('/');
    expect(reply.status).toBe(302);
    expect(reply.headers.location).toBe('/console/');
  });

  it('answers index.html, uncached and under the CSP, for /console/ and every deep link', async () => {
    for (const urlPath of [
      '/console/',
      '/console',
      '/console/instances/ins_01abc',
      '/console/settings?tab=keys',
    ]) {
      const reply = await get(urlPath);
      expect(reply.status, urlPath).toBe(200);
      expect(reply.headers['content-type']).toMatch(/^text\/html/);
      expect(reply.headers['cache-control']).toBe('no-cache');
      expect(reply.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(reply.headers['strict-transport-security']).toMatch(/max-age/);
      expect(reply.text).toContain('<div id="app"></div>');
      // No inline script: the CSP would block it.
      expect(reply.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    }
  });

  it('serves hashed assets with a year of immutable caching, and 404s unknown ones', async () => {
    const index = await get('/console/');
    const assets = [...index.text.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.some((asset) => asset.endsWith('.js'))).toBe(true);
    expect(assets.some((asset) => asset.endsWith('.css'))).toBe(true);
    for (const asset of assets) {
      const reply = await get(asset);
      expect(reply.status, asset).toBe(200);
      expect(reply.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(reply.headers['content-type']).toMatch(
        asset.endsWith('.js') ? /^text\/javascript/ : /^text\/css/,
      );
      expect(asset).toMatch(/-[A-Za-z0-9_-]{8}\.(js|css)$/);
    }
    const missing = await get('/console/assets/index-00000000.js');
    expect(missing.status).toBe(404);
    expect(missing.headers['cache-control']).toBe('no-store');
  });

  it('keeps the rest of the API as it was: HTTPS only, the /v1 404 envelope, no console in OpenAPI', async () => {
    const plain = await sendRequest(server.httpUrl!, null, 'GET', '/console/', { notApi: true });
    expect(plain.status).toBe(400);
    expect(plain.body.error.message).toMatch(/HTTPS is required/);

    const unknown = await server.request('GET', '/v1/console', { key: server.rootKey });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');

    const document = await server.request('GET', '/v1/openapi.json');
    expect(Object.keys(document.body.paths).filter((p) => p === '/' || p.startsWith('/console'))).toEqual([]);
  });

  it('answers a clear 503 while the console is not built', async () => {
    // The console's routes alone, over a directory with no build (the suite's server has one).
    const app = Fastify();
    await app.register(consoleRoutes, { dir: mkdtempSync(path.join(os.tmpdir(), 'nimbus-no-console-')) });
    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const reply = await sendRequest(address, null, 'GET', '/console/instances', { notApi: true });
      expect(reply.status).toBe(503);
      expect(reply.text).toMatch(/npm run build/);
    } finally {
      await app.close();
    }
  });
});
