/**
 * The operator's Prometheus endpoint (`GET /metrics` on NIMBUS_METRICS_PORT, loopback). It names no
 * tenant (instance-metrics.ts aggregates), and with NIMBUS_METRICS_TOKEN set it answers only a scraper
 * that sends `Authorization: Bearer <token>`: loopback is shared by every local process.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Whether the request carries the token. Both sides are hashed first, so the comparison is constant time
 * whatever the lengths, and a wrong guess learns nothing of the token's length either.
 */
export function carriesToken(authorization: string | undefined, token: string): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '');
  // A missing header is compared too, against nothing, so its answer takes as long as a wrong token's.
  return timingSafeEqual(digest(match?.[1] ?? ''), digest(token)) && match !== null;
}

export function metricsHandler(
  token: string | null,
  exposition: () => Promise<{ contentType: string; text: string }>,
): http.RequestListener {
  return async (req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    if (token !== null && !carriesToken(req.headers.authorization, token)) {
      res
        .writeHead(401, {
          'Content-Type': 'text/plain; charset=utf-8',
          'WWW-Authenticate': 'Bearer realm="nimbus-metrics"',
        })
        .end('Send the token of NIMBUS_METRICS_TOKEN as "Authorization: Bearer <token>"\n');
      return;
    }
    const { contentType, text } = await exposition();
    res.writeHead(200, { 'Content-Type': contentType }).end(text);
  };
}
