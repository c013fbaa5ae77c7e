/**
 * The two keyless ports beside the API (issue 29, item 6): the Prometheus port names no tenant and, with
 * NIMBUS_METRICS_TOKEN, answers only its scraper; the metadata port rate-limits each source address and
 * answers no input with a 5xx. Over real sockets. (That the metadata port binds loopback only is
 * metadataHost's rule: src/platform/http/metrics-endpoint.test.ts.)
 */
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { METADATA_RATE_LIMIT } from '../src/resources/instances/metadata-server.js';
import { account, waitFor } from './helpers/common.js';
import { createInstance } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

const TOKEN = 'scrape-token-for-the-test-0123456789';

function get(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
      })
      .on('error', reject);
  });
}

/** Sends bytes as they are (requests an HTTP client would not make) and returns the status line's code. */
function raw(port: number, request: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(request));
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0)));
  });
}

describe('the metrics port', () => {
  const server = serverForSuite({
    env: { NIMBUS_METRICS_INTERVAL_SECONDS: '1', NIMBUS_METRICS_TOKEN: TOKEN },
  });
  const port = () => server.running.metricsPort as number;

  it('asks for the token: none or a wrong one is 401, the right one is served', async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong-token-0123456789' },
      { authorization: TOKEN },
    ];
    for (const headers of attempts) {
      const refused = await get(port(), '/metrics', headers);
      expect(refused.status).toBe(401);
      expect(refused.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(refused.text).not.toContain('nimbus_');
    }
    const served = await get(port(), '/metrics', { authorization: `Bearer ${TOKEN}` });
    expect(served.status).toBe(200);
    expect(served.text).toContain('nimbus_http_requests_total');
  });

  it('names no account, instance or key after tenants create instances: it aggregates per region', async () => {
    const tenants = [await account(server), await account(server)];
    const ids: string[] = [];
    for (const tenant of tenants) {
      ids.push(tenant.id, (await createInstance(server, tenant.key)).id);
      const keys = await server.request('GET', '/v1/account/api-keys', { key: tenant.key });
      ids.push(...keys.body.data.map((key: { id: string }) => key.id));
    }
    const text = await waitFor(
      'the collector to sample both instances',
      async () => {
        const scraped = await get(port(), '/metrics', { authorization: `Bearer ${TOKEN}` });
        const sampled = /nimbus_instances_sampled\{region="us-east-1"\} (\d+)/.exec(scraped.text);
        return Number(sampled?.[1] ?? 0) >= 2 ? scraped.text : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(text).toMatch(/nimbus_instances_cpu_percent_sum\{region="us-east-1"\} [0-9.]+\n/);
    for (const id of ids) expect(text).not.toContain(id);
    expect(text).not.toMatch(/\b(ins|acct|key)_[0-9a-z]{10,}/);
  });
});

describe('the metadata port', () => {
  const server = serverForSuite();
  const port = () => server.running.metadataPort as number;

  it('answers no input with a 5xx', async () => {
    const instance = await createInstance(server, server.rootKey);
    const id = instance.id;
    const statuses = [
      await raw(
        port(),
        `GET /latest/meta-data/%ff HTTP/1.1\r\nHost: x\r\nX-Nimbus-Instance-Id: ${id}\r\n\r\n`,
      ),
      await raw(
        port(),
        `GET /latest/meta-data/%00 HTTP/1.1\r\nHost: x\r\nX-Nimbus-Instance-Id: ${id}\r\n\r\n`,
      ),
      await raw(port(), 'GET /latest/user-data HTTP/1.1\r\nHost: x\r\nX-Nimbus-Instance-Id: %\r\n\r\n'),
      await raw(
        port(),
        `GET /latest/user-data HTTP/1.1\r\nHost: x\r\nX-Nimbus-Instance-Id: ${'i'.repeat(8000)}\r\n\r\n`,
      ),
      await raw(
        port(),
        `GET /latest/user-data HTTP/1.1\r\nHost: x\r\nX-Nimbus-Instance-Id: ${id}\r\nX-Nimbus-Instance-Id: ${id}\r\n\r\n`,
      ),
      await raw(
        port(),
        `POST /latest/user-data HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nX-Nimbus-Instance-Id: ${id}\r\n\r\n{nope`,
      ),
      await raw(port(), 'GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n'),
      await raw(port(), 'BREW /latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n'),
      await raw(port(), 'GET /latest/meta-data/ HTTP/1.1\r\n\r\n'),
      await raw(port(), 'NOT-HTTP\r\n\r\n'),
    ];
    for (const status of statuses) {
      expect(status).toBeGreaterThanOrEqual(200);
      expect(status).toBeLessThan(500);
    }
  });

  it('rate-limits a flood from one address with 429 and Retry-After, in its own text', async () => {
    const instance = await createInstance(server, server.rootKey);
    const answers: { status: number; text: string; headers: http.IncomingHttpHeaders }[] = [];
    // Up to twice the burst, one after another: the budget refills far slower than this.
    for (let sent = 0; sent < METADATA_RATE_LIMIT.burst * 2; sent++) {
      const answer = await get(port(), '/latest/meta-data/instance-id', {
        'x-nimbus-instance-id': instance.id,
      });
      answers.push(answer);
      if (answer.status === 429) break;
    }
    const refused = answers.at(-1);
    expect(refused?.status).toBe(429);
    expect(refused?.headers['content-type']).toMatch(/^text\/plain/);
    expect(Number(refused?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused?.text).toMatch(/Too many requests/);
    // The ones before were served, and the flood cost the API nothing.
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(
      METADATA_RATE_LIMIT.burst / 2,
    );
    const api = await server.request('GET', '/v1/account', { key: server.rootKey });
    expect(api.status).toBe(200);
  });
});
