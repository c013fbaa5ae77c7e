/**
 * Metric history over HTTPS on both stores, with a manual clock and stepped jobs: the collector samples
 * every 10 s of simulated time, so every point is where the test put it. Collection and the 10 s series,
 * GPU series, step and aggregates, zero-then-gap after a stop, the Prometheus gauges, bad parameters as a
 * table, cross-account 404, and retention: 25 h later the first hour comes from 5-minute rollups that
 * agree with the samples, 31 days later it is gone.
 */
import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid } from './helpers/common.js';
import { act, createInstance, getInstance } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

type Points = [string, number][];
interface Series {
  metric: string;
  unit: string;
  points: Points;
}

const START = new Date('2026-03-02T09:00:00Z');
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/metrics' }, (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
}

describe.each(STORES)('Metric history (%s)', (store) => {
  const clock = new ManualClock(START);
  const server = serverForSuite({
    store,
    clock,
    steppedJobs: true,
    env: { NIMBUS_SIM_SPEEDUP: '1', NIMBUS_METRICS_INTERVAL_SECONDS: '10' },
  });
  const runDue = () => server.running.backends.jobs.runDue();
  /** Moves simulated time on by `ms` in 10-second steps, running due jobs (the collector among them) at each. */
  async function advance(ms: number): Promise<void> {
    const target = clock.nowMs() + ms;
    await runDue();
    while (clock.nowMs() < target) {
      clock.advance(Math.min(10_000, target - clock.nowMs()));
      await runDue();
    }
  }
  const history = (key: string, id: string, query = '') =>
    server.request('GET', `/v1/instances/${id}/metrics${query ? `?${query}` : ''}`, { key });
  const seriesOf = (body: { data: { series: Series[] } }, metric: string) =>
    body.data.series.find((s) => s.metric === metric) as Series;

  let owner = { id: '', key: '' };
  let compute = '';
  let gpu = '';
  /** The first ten minutes of the compute instance at 5-minute steps, as max and min of the 10 s samples. */
  let firstMax: Points = [];
  let firstMin: Points = [];
  let firstAvg: Points = [];
  let collectedFrom = 0;
  /** The range of those ten minutes, from the 5-minute boundary before them. */
  let firstRange = '';

  beforeAll(async () => {
    owner = await account(server);
    compute = (await createInstance(server, owner.key)).id;
    gpu = (await createInstance(server, owner.key, { instance_type: 'gpu-1x', image: 'ubuntu-22.04-cuda' }))
      .id;
    await advance(10_000);
    expect((await getInstance(server, owner.key, compute)).status).toBe('running');
    collectedFrom = clock.nowMs();
    await advance(10 * MINUTE);
  });

  it('answers the last hour at 10 s by default: every metric of the type, each point a 10 s sample', async () => {
    const reply = await history(owner.key, compute);
    expect(reply.status, reply.text).toBe(200);
    const data = reply.body.data;
    expect(data).toMatchObject({ instance_id: compute, step: 10, aggregate: 'avg', resolution: 'raw' });
    expect(Date.parse(data.end) - Date.parse(data.start)).toBe(HOUR);
    expect(data.series.map((s: Series) => s.metric)).toEqual([
      'cpu_percent',
      'memory_used_bytes',
      'memory_total_bytes',
      'disk_read_bps',
      'disk_write_bps',
      'net_rx_bps',
      'net_tx_bps',
    ]);
    const cpu = seriesOf(reply.body, 'cpu_percent');
    expect(cpu.unit).toBe('percent');
    // Ten minutes of samples since the boot finished, one every 10 s.
    expect(cpu.points.length).toBeGreaterThanOrEqual(60);
    expect(cpu.points.length).toBeLessThanOrEqual(62);
    for (const [at, value] of cpu.points) {
      expect(Date.parse(at) % 10_000).toBe(0);
      expect(value).toBeGreaterThan(0);
      expect(value).toBeLessThanOrEqual(100);
    }
    const total = seriesOf(reply.body, 'memory_total_bytes').points;
    expect(new Set(total.map(([, v]) => v))).toEqual(new Set([2 * 1024 ** 3]));
    for (const [, used] of seriesOf(reply.body, 'memory_used_bytes').points) {
      expect(used).toBeGreaterThan(0);
      expect(used).toBeLessThan(2 * 1024 ** 3);
    }
    // Samples are deterministic per instance and time: asking again gives the same answer.
    expect((await history(owner.key, compute)).body.data.series).toEqual(data.series);
  });

  it('GPU types also have gpu_percent; a chosen list of metrics comes back in the order asked', async () => {
    const reply = await history(owner.key, gpu, 'metrics=gpu_percent,cpu_percent');
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.data.series.map((s: Series) => s.metric)).toEqual(['gpu_percent', 'cpu_percent']);
    const points = seriesOf(reply.body, 'gpu_percent').points;
    expect(points.length).toBeGreaterThanOrEqual(60);
    for (const [, value] of points) expect(value).toBeGreaterThan(0);
  });

  it('step buckets the samples with avg, min or max (min ≤ avg ≤ max in every bucket)', async () => {
    // Whole 5-minute buckets only: samples collected later must not land in them.
    const to = collectedFrom + 10 * MINUTE;
    firstRange = `start=${new Date(collectedFrom - (collectedFrom % (5 * MINUTE))).toISOString()}&end=${new Date(to - (to % (5 * MINUTE)) - 1000).toISOString()}`;
    const range = firstRange;
    const at = async (aggregate: string) => {
      const reply = await history(
        owner.key,
        compute,
        `${range}&step=300&metrics=cpu_percent&aggregate=${aggregate}`,
      );
      expect(reply.status, reply.text).toBe(200);
      expect(reply.body.data.step).toBe(300);
      return reply.body.data.series[0].points as Points;
    };
    firstMax = await at('max');
    firstMin = await at('min');
    firstAvg = await at('avg');
    expect(firstMax.length).toBeGreaterThanOrEqual(2);
    firstMax.forEach(([time, max], i) => {
      expect(Date.parse(time) % (5 * MINUTE)).toBe(0);
      expect(firstMin[i]?.[0]).toBe(time);
      expect(firstMin[i]?.[1]).toBeLessThanOrEqual(firstAvg[i]?.[1] as number);
      expect(firstAvg[i]?.[1]).toBeLessThanOrEqual(max);
    });
    expect(firstMax.some(([, max], i) => max > (firstMin[i]?.[1] as number))).toBe(true);
  });

  it('the operator port shows the latest samples per region, naming no account or instance', async () => {
    const text = await scrape(server.running.metricsPort as number);
    expect(text).toContain('# TYPE nimbus_instances_cpu_percent_sum gauge');
    expect(text).toMatch(/nimbus_instances_sampled\{region="us-east-1"\} [1-9]\d*\n/);
    expect(text).toMatch(/nimbus_instances_cpu_percent_max\{region="us-east-1"\} [0-9.]+\n/);
    const memory = /nimbus_instances_memory_total_bytes_max\{region="us-east-1"\} (\d+)\n/.exec(text);
    expect(Number(memory?.[1])).toBeGreaterThanOrEqual(2147483648);
    expect(text).toMatch(/nimbus_instances_gpu_percent_count\{region="[a-z0-9-]+"\} [1-9]\d*\n/);
    for (const id of [owner.id, compute, gpu]) expect(text).not.toContain(id);
    expect(text).not.toMatch(/\b(ins|acct|key)_[0-9a-z]{10,}/);
  });

  it.each([
    ['end before start', 'start=2026-03-02T09:00:00Z&end=2026-03-02T08:00:00Z', 'end'],
    ['a range over 30 days', 'start=2026-01-01T00:00:00Z&end=2026-02-01T00:00:01Z', 'start'],
    ['a step that is not a multiple of 10', 'step=15', 'step'],
    ['a step under 10', 'step=0', 'step'],
    [
      'a step too small for the range (17,281 points)',
      'start=2026-02-28T09:00:00Z&end=2026-03-02T09:00:00Z&step=10',
      'step',
    ],
    [
      'a step too small for 30 days at 5 min resolution',
      'start=2026-02-01T09:00:00Z&end=2026-03-02T09:00:00Z&step=200',
      'step',
    ],
    ['an unknown metric', 'metrics=cpu_percent,load_average', 'metrics'],
    ['gpu_percent on a type without GPUs', 'metrics=gpu_percent', 'metrics'],
    ['a malformed metrics list', 'metrics=cpu_percent,,net_rx_bps', 'metrics'],
    ['an unknown aggregate', 'aggregate=median', 'aggregate'],
    ['a start that is not a timestamp', 'start=yesterday', 'start'],
    ['an end that is not a timestamp', 'end=2026-13-01T00:00:00Z', 'end'],
    ['an unknown parameter', 'resolution=raw', 'resolution'],
  ])('400 invalid_request for %s', async (_, query, field) => {
    const reply = await history(owner.key, compute, query);
    expectInvalid(reply, field);
  });

  it('the step error says the smallest step that fits', async () => {
    const error = expectError(
      await history(owner.key, compute, 'start=2026-02-28T09:00:00Z&end=2026-03-02T09:00:00Z&step=10'),
      400,
      'invalid_request',
    );
    expect(error.details).toMatchObject({ field: 'step', value: 10, minimum: 20, max_points: 11_000 });
  });

  it("another account's instance, and a made-up id, are 404 not_found", async () => {
    const stranger = await account(server);
    for (const [key, id] of [
      [stranger.key, compute],
      [owner.key, 'ins_doesnotexist'],
    ] as const) {
      const error = expectError(await history(key, id), 404, 'not_found');
      expect(error.details).toEqual({ resource: 'instance', id });
    }
  });

  it('after a stop the samples fall to zero, then stop: a gap, not zeros', async () => {
    const id = (await createInstance(server, owner.key)).id;
    await advance(2 * MINUTE);
    const stoppedAt = clock.nowMs();
    expect((await act(server, owner.key, id, 'stop')).status).toBe(202);
    await advance(10 * MINUTE);
    expect((await getInstance(server, owner.key, id)).status).toBe('stopped');
    const reply = await history(owner.key, id, 'metrics=cpu_percent,net_rx_bps');
    for (const series of reply.body.data.series as Series[]) {
      const before = series.points.filter(([at]) => Date.parse(at) < stoppedAt);
      const after = series.points.filter(([at]) => Date.parse(at) > stoppedAt);
      expect(before.length).toBeGreaterThanOrEqual(10);
      for (const [, value] of before) expect(value).toBeGreaterThan(0);
      // The first sample after the stop is zero (the machine is off), and then there are no more.
      expect(after.map(([, value]) => value)).toEqual([0]);
    }
  });

  it('25 h later the first hour comes from 5-minute rollups that agree with the samples; 31 days later it is gone', async () => {
    const firstHour = new Date(collectedFrom - (collectedFrom % HOUR));
    const range = firstRange;
    clock.set(new Date(START.getTime() + 25 * HOUR));
    await runDue();
    const db = server.running.backends.store.db;
    const raw = await db
      .selectFrom('metric_blocks')
      .select(['block_start', 'sealed'])
      .where('instance_id', '=', compute)
      .where('resolution', '=', 'raw')
      .where('block_start', '=', firstHour.toISOString())
      .execute();
    expect(raw).toEqual([]);
    for (const [aggregate, expected] of [
      ['max', firstMax],
      ['min', firstMin],
    ] as const) {
      const reply = await history(
        owner.key,
        compute,
        `${range}&metrics=cpu_percent&aggregate=${aggregate}&step=10`,
      );
      expect(reply.status, reply.text).toBe(200);
      // Asked for 10 s, answered at the data's 5 minutes.
      expect(reply.body.data).toMatchObject({ resolution: 'rollup', step: 300 });
      expect(reply.body.data.series[0].points).toEqual(expected);
    }
    const avg = (await history(owner.key, compute, `${range}&metrics=cpu_percent`)).body.data.series[0]
      .points as Points;
    expect(avg.map(([at]) => at)).toEqual(firstAvg.map(([at]) => at));
    avg.forEach(([, value], i) => {
      expect(Math.abs(value - (firstAvg[i]?.[1] as number))).toBeLessThanOrEqual(0.05 + 1e-9);
    });

    clock.set(new Date(START.getTime() + 31 * DAY));
    await runDue();
    const gone = await history(owner.key, compute, range);
    expect(gone.status, gone.text).toBe(200);
    for (const series of gone.body.data.series as Series[]) expect(series.points).toEqual([]);
    const rows = await db
      .selectFrom('metric_blocks')
      .select('block_start')
      .where('instance_id', '=', compute)
      // Every block of the first day (the day block of 3 March still holds samples from 30 days ago).
      .where('block_start', '<', '2026-03-03T00:00:00.000Z')
      .execute();
    expect(rows).toEqual([]);
  });
});
