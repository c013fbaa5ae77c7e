/** The SDK's metric stream client against the real server over WSS, with the `ws` package as its socket. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  type MetricsMessage,
  MetricsStreamClosedError,
  openMetricsStream,
  type StatusMessage,
  type WebSocketConstructor,
} from '../sdk/src/metrics-stream.js';
import { account } from './helpers/common.js';
import { act, createRunning } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

describe('SDK metric stream (sqlite)', () => {
  const server = serverForSuite({ env: { NIMBUS_METRICS_INTERVAL_SECONDS: '1' } });
  const socketOptions = () => ({ ca: readFileSync(server.running.certFile) });

  it('subscribes at 1 s, hands over typed metrics and status messages, and closes', async () => {
    const { key } = await account(server);
    const id = (await createRunning(server, key)).id;
    const stream = openMetricsStream({
      baseUrl: server.url,
      apiKey: key,
      instanceId: id,
      interval: 1,
      metrics: ['cpu_percent'],
      WebSocket: WebSocket as unknown as WebSocketConstructor,
      socketOptions: socketOptions(),
    });
    const metrics: MetricsMessage[] = [];
    const statuses: StatusMessage[] = [];
    stream.onMetrics((m) => metrics.push(m));
    stream.onStatus((s) => statuses.push(s));
    expect(await stream.ready).toMatchObject({ type: 'subscribed', interval: 1, instances: [id] });
    await expect.poll(() => metrics.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    expect(Object.keys(metrics[0] as object).sort()).toEqual([
      'cpu_percent',
      'instance_id',
      'timestamp',
      'type',
    ]);
    expect((await stream.subscribe({ interval: 2 })).interval).toBe(2);
    expect((await act(server, key, id, 'stop')).status).toBe(202);
    await expect.poll(() => statuses.map((s) => s.status), { timeout: 10_000 }).toContain('stopped');
    stream.close();
    expect((await stream.closed).code).toBe(1000);
  });

  it('a refused stream rejects ready with the close code and the server error', async () => {
    const stream = openMetricsStream({
      baseUrl: server.url,
      apiKey: `nmb_${'x'.repeat(43)}`,
      instanceId: 'ins_any',
      WebSocket: WebSocket as unknown as WebSocketConstructor,
      socketOptions: socketOptions(),
    });
    const error = await stream.ready.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MetricsStreamClosedError);
    expect(error).toMatchObject({ code: 4401, error: { code: 'authentication_failed' } });
  });
});
