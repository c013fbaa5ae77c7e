/**
 * The HTTPS webhook receiver of bench/webhooks.mjs, run as a child process of it (fork, with IPC) so that
 * its CPU time is its own and not the server's. It makes its self-signed certificate with Nimbus' own
 * `loadOrCreateTls` (from dist/, so `npm run build` first) in the dir given as its first argument, answers
 * every POST with 204 once the body is in, and keeps for each delivery the moment it arrived and its lag:
 * arrival minus the event's `timestamp` in the body (both wall-clock milliseconds of the same machine).
 *
 * Messages: sends {type: 'ready', port, caFile} once listening; answers {type: 'take'} with
 * {type: 'taken', at, lag, ids} holding what arrived since the last take, and forgets it.
 */
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { loadOrCreateTls } = await import(pathToFileURL(path.join(root, 'dist', 'http', 'tls.js')).href);

const dir = process.argv[2];
if (!dir || !process.send) {
  process.stderr.write('usage: forked by bench/webhooks.mjs with a data dir\n');
  process.exit(2);
}

const tls = await loadOrCreateTls({ dataDir: dir, files: null, host: '127.0.0.1' });

// Arrival times and lags in ms; performance.timeOrigin + now() is the wall clock with sub-ms precision.
let at = [];
let lag = [];
let ids = [];
let malformed = 0;

const server = https.createServer({ key: tls.key, cert: tls.cert, keepAliveTimeout: 60_000 }, (req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const now = performance.timeOrigin + performance.now();
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      at.push(now);
      lag.push(now - Date.parse(body.timestamp));
      ids.push(String(req.headers['webhook-id']));
    } catch {
      malformed += 1;
    }
    res.writeHead(204);
    res.end();
  });
});

server.listen(0, '127.0.0.1', () => {
  process.send({ type: 'ready', port: server.address().port, caFile: tls.certFile });
});

process.on('message', (message) => {
  if (message?.type !== 'take') return;
  process.send({ type: 'taken', at, lag, ids, malformed });
  at = [];
  lag = [];
  ids = [];
  malformed = 0;
});

// The parent going away (killed, failed) ends the receiver too.
process.on('disconnect', () => process.exit(0));
