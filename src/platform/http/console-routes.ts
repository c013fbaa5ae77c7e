/**
 * The web console (console/, built by Vite into dist/console): `GET /` redirects to it, hashed assets
 * are served with a year's caching, and every other path under /console/ answers index.html (not cached)
 * so that deep links such as /console/instances/ins_… load the app, whose router takes over.
 *
 * The files are read from disk on first use and kept in memory (the build is a few hundred KB); a server
 * started before `npm run build` (most tests) answers 503 until the build exists. These routes are
 * public (the app asks for the key itself), hidden from the OpenAPI document, and still go through the
 * transport hook (HTTPS only) like everything else.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** dist/console at the repository root: three levels up from both src/platform/http and dist/platform/http. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../../dist/console/', import.meta.url));

export const CONSOLE_CSP = [
  "default-src 'self'",
  "connect-src 'self' wss:",
  "img-src 'self' data:",
  "style-src 'self'",
  "script-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "frame-ancestors 'none'",
].join('; ');

const IMMUTABLE = 'public, max-age=31536000, immutable';

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
};

interface ConsoleFiles {
  index: Buffer;
  /** File name under assets/ → its bytes. */
  assets: Map<string, Buffer>;
}

/** Reads the build, or null when there is none yet. */
function readBuild(dir: string): ConsoleFiles | null {
  const indexFile = path.join(dir, 'index.html');
  if (!existsSync(indexFile)) return null;
  const assets = new Map<string, Buffer>();
  const assetDir = path.join(dir, 'assets');
  if (existsSync(assetDir)) {
    for (const name of readdirSync(assetDir)) assets.set(name, readFileSync(path.join(assetDir, name)));
  }
  return { index: readFileSync(indexFile), assets };
}

export async function consoleRoutes(app: FastifyInstance, options: { dir?: string }): Promise<void> {
  const dir = options.dir ?? CONSOLE_DIR;
  let build: ConsoleFiles | null = null;
  const loaded = (): ConsoleFiles | null => {
    build ??= readBuild(dir);
    return build;
  };
  // Any query string is the app's business (its router reads it), so the API's unknown-query refusal
  // (schemas.ts, rejectUnknownQuery) must not apply: an explicit open querystring schema says so.
  const hidden = {
    schema: { hide: true, querystring: { type: 'object', additionalProperties: true } },
    // Everyone behind one address loads these files, served from memory: they report the address's
    // budget without spending it (a 429 would cost as much as the answer).
    config: { public: true, rateLimit: 'peek' as const },
  };

  const sendIndex = (reply: FastifyReply) => {
    reply.header('content-security-policy', CONSOLE_CSP);
    const files = loaded();
    if (!files) {
      return reply
        .code(503)
        .header('cache-control', 'no-store')
        .type('text/plain; charset=utf-8')
        .send('The web console is not built: run `npm run build`, then reload this page.\n');
    }
    return reply
      .header('cache-control', 'no-cache')
      .header('referrer-policy', 'no-referrer')
      .type('text/html; charset=utf-8')
      .send(files.index);
  };

  app.get('/', hidden, async (_request, reply) => reply.redirect('/console/', 302));
  app.get('/console', hidden, async (_request, reply) => sendIndex(reply));
  app.get('/console/assets/:file', hidden, async (request, reply) => {
    const { file } = request.params as { file: string };
    const bytes = loaded()?.assets.get(file);
    reply.header('content-security-policy', CONSOLE_CSP);
    if (!bytes) {
      return reply
        .code(404)
        .header('cache-control', 'no-store')
        .type('text/plain; charset=utf-8')
        .send('No such console asset\n');
    }
    return reply
      .header('cache-control', IMMUTABLE)
      .type(CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream')
      .send(bytes);
  });
  app.get('/console/*', hidden, async (_request, reply) => sendIndex(reply));
}
