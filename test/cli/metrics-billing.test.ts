/**
 * `nimbus metrics` and `nimbus billing` as child processes against the real HTTPS server, whose collector
 * samples every second (NIMBUS_METRICS_INTERVAL_SECONDS=1): history as a table of series, every point,
 * and JSON equal to the API's data; `watch` from the WebSocket stream as lines in a pipe, as NDJSON, and
 * redrawn in place on a pseudo-terminal, stopped by Ctrl-C with exit 0; stream refusals as exit codes.
 * Billing: usage, the running month's draft invoice (table, JSON, PDF and CSV files) and estimates.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { beforeAll, describe, expect, it } from 'vitest';
import { BIN, type Cli, cliFor, ensureBuilt, expectErrorLine } from '../helpers/cli.js';
import { account, waitFor } from '../helpers/common.js';
import { serverForSuite } from '../helpers/server.js';

const SHAPE = ['--type', 'compute-2x', '--region', 'us-east-1', '--image', 'ubuntu-24.04'];
/** `2026-03-01T10:00:00.000Z ins_… cpu_percent=12.5 memory_used_bytes=123`: one message of watch in a pipe. */
const METRICS_LINE = /^\d{4}-\d\d-\d\dT[\d:.]+Z (ins_\w+)((?: [a-z_]+=[\d.]+)+)$/;

describe('nimbus metrics and billing', () => {
  const server = serverForSuite({ env: { NIMBUS_METRICS_INTERVAL_SECONDS: '1' } });
  let cli: Cli;
  let key: string;
  let instanceId: string;

  beforeAll(async () => {
    ensureBuilt();
    key = (await account(server)).key;
    cli = cliFor(server, key);
    instanceId = (await cli.json('instances', 'create', 'web-1', ...SHAPE, '--wait')).id;
    // The collector's first samples of the new instance.
    await waitFor(
      'the first cpu_percent point',
      async () => {
        const reply = await server.request('GET', `/v1/instances/${instanceId}/metrics?metrics=cpu_percent`, {
          key,
        });
        return reply.body.data.series[0]?.points.length > 0 ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }, 180_000);

  describe('metrics get', () => {
    it('prints the API data as JSON, a row per series by default, every point with --points', async () => {
      // A range that ended 20 s ago (on a 10 s boundary) holds no step still filling, so the CLI's answer and
      // the API's, asked a few seconds apart, are the same; wait until it holds a point.
      let start = '';
      let end = '';
      const api = await waitFor(
        'a point in a finished range',
        async () => {
          end = new Date(Math.floor(Date.now() / 10_000) * 10_000 - 20_000).toISOString();
          start = new Date(Date.parse(end) - 10 * 60_000).toISOString();
          const reply = await server.request(
            'GET',
            `/v1/instances/${instanceId}/metrics?start=${encodeURIComponent(start)}&end=${encodeURIComponent(end)}`,
            { key },
          );
          return reply.body.data.series[0]?.points.length > 0 ? reply : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 1000 },
      );
      const json = await cli.json('metrics', 'get', 'web-1', '--start', start, '--end', end);
      expect(json).toEqual(api.body.data);
      const names = json.series.map((series: { metric: string }) => series.metric);
      expect(names).toEqual(expect.arrayContaining(['cpu_percent', 'memory_used_bytes', 'net_rx_bps']));

      const table = await cli.run('metrics', 'get', 'web-1', '--metrics', 'cpu_percent,memory_used_bytes');
      expect(table.code, table.stderr).toBe(0);
      const [header, ...rows] = table.stdout.trim().split('\n');
      expect(header!.split(/\s{2,}/)).toEqual(['METRIC', 'POINTS', 'LATEST', 'MIN', 'AVG', 'MAX']);
      expect(rows.map((row) => row.split(/\s+/)[0])).toEqual(['cpu_percent', 'memory_used_bytes']);
      expect(rows[0]).toMatch(/^cpu_percent\s+\d+\s+\d+\.\d%\s+\d+\.\d%\s+\d+\.\d%\s+\d+\.\d%$/);
      expect(rows[1]).toMatch(/\d+\.\d (KiB|MiB|GiB)/);
      // The range and the step on stderr, not among the rows a script reads.
      expect(table.stderr).toMatch(
        new RegExp(`^${instanceId}: \\S+ to \\S+, every 10 s \\(avg, raw samples\\)`),
      );

      const points = await cli.run(
        'metrics',
        'get',
        instanceId,
        '--metrics',
        'cpu_percent',
        '--start',
        '10m',
        '--points',
      );
      expect(points.code, points.stderr).toBe(0);
      const [pointsHeader, ...pointRows] = points.stdout.trim().split('\n');
      expect(pointsHeader!.split(/\s{2,}/)).toEqual(['TIME', 'CPU_PERCENT']);
      expect(pointRows.length).toBeGreaterThanOrEqual(1);
      for (const row of pointRows) expect(row).toMatch(/^\d{4}-\d\d-\d\dT\S+Z\s+\d+\.\d%$/);
    }, 240_000);

    it('passes --step and --aggregate on, and fails as the API and the parser say', async () => {
      const max = await cli.json(
        'metrics',
        'get',
        'web-1',
        '--start',
        '1h',
        '--step',
        '60',
        '--aggregate',
        'max',
      );
      expect(max).toMatchObject({ step: 60, aggregate: 'max', instance_id: instanceId });
      expectErrorLine(await cli.run('metrics', 'get', 'web-1', '--step', '15'), 1, 'invalid_request');
      expectErrorLine(
        await cli.run('metrics', 'get', 'web-1', '--metrics', 'gpu_percent'),
        1,
        'invalid_request',
      );
      expectErrorLine(await cli.run('metrics', 'get', 'ins_doesnotexist'), 4, 'not_found');
      const badTime = await cli.run('metrics', 'get', 'web-1', '--start', 'yesterday');
      expect(badTime.code).toBe(2);
      expect(badTime.stderr).toContain('expected an ISO 8601 time, or a time ago such as 30m, 6h or 7d');
      expect((await cli.run('metrics', 'get', 'web-1', '--aggregate', 'median')).code).toBe(2);
    }, 240_000);
  });

  describe('metrics watch', () => {
    it('in a pipe: a line per message, status changes included, until Ctrl-C (SIGINT), exit 0', async () => {
      const watch = cli.start(
        'metrics',
        'watch',
        'web-1',
        '--interval',
        '1',
        '--metrics',
        'cpu_percent,net_rx_bps',
      );
      const metricsLines = () =>
        watch
          .stdout()
          .split('\n')
          .filter((line) => METRICS_LINE.test(line));
      await waitFor('two metrics lines', () => (metricsLines().length >= 2 ? true : undefined), {
        timeoutMs: 60_000,
        intervalMs: 100,
        lastSeen: () => JSON.stringify(watch.stdout() + watch.stderr()),
      });
      for (const line of metricsLines()) {
        const [, id, values] = METRICS_LINE.exec(line)!;
        expect(id).toBe(instanceId);
        expect(
          values!
            .trim()
            .split(' ')
            .map((pair) => pair.split('=')[0]),
        ).toEqual(['cpu_percent', 'net_rx_bps']);
      }
      expect(watch.stderr()).toContain(`Streaming ${instanceId} every 1 s (Ctrl-C to stop)`);
      // A stop while it watches arrives as status lines.
      expect((await cli.run('instances', 'stop', 'web-1', '--wait')).code).toBe(0);
      await waitFor(
        'the stopped status line',
        () =>
          watch.stdout().includes(`${instanceId} status=stopped event=instance.stopped`) ? true : undefined,
        { timeoutMs: 60_000, intervalMs: 100, lastSeen: () => JSON.stringify(watch.stdout()) },
      );
      watch.kill('SIGINT');
      const ended = await watch.exited;
      expect(ended.code, ended.stderr).toBe(0);
      expect(ended.stderr).not.toMatch(/Error/);
      expect((await cli.run('instances', 'start', 'web-1', '--wait')).code).toBe(0);
    }, 240_000);

    it('-o json: one message object per line; --count ends it by itself', async () => {
      const run = await cli.run('metrics', 'watch', 'web-1', '--interval', '1', '--count', '2', '-o', 'json');
      expect(run.code, run.stderr).toBe(0);
      const messages = run.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      const metrics = messages.filter((message) => message.type === 'metrics');
      expect(metrics).toHaveLength(2);
      for (const message of metrics) {
        expect(message).toMatchObject({ instance_id: instanceId, cpu_percent: expect.any(Number) });
        expect(Date.parse(message.timestamp)).not.toBeNaN();
      }
    }, 240_000);

    it('on a terminal: the values redrawn in place, the cursor hidden then shown again, Ctrl-C exits 0', async () => {
      // A terminal 100 columns wide; exec: the command is the terminal's foreground process itself, not a
      // child of a shell that Ctrl-C would end first.
      const command = `stty cols 100 rows 40; exec ${[
        process.execPath,
        BIN,
        'metrics',
        'watch',
        'web-1',
        '--interval',
        '1',
      ]
        .map((word) => `'${word}'`)
        .join(' ')}`;
      const child = spawn('script', ['-qefc', command, '/dev/null'], {
        env: { ...cli.env, SHELL: '/bin/sh', TERM: 'xterm' },
        stdio: 'pipe',
      });
      let screen = '';
      child.stdout.on('data', (chunk: Buffer) => {
        screen += chunk.toString();
      });
      const exited = new Promise<number>((resolve) => child.once('close', (code) => resolve(code ?? -1)));
      // A frame is redrawn over the previous one: cursor up to its first line ("\e[<n>F"), clear below ("\e[J").
      const ESC = '\u001b';
      const redraws = () => screen.match(new RegExp(`${ESC}\\[\\d+F${ESC}\\[J`, 'g'))?.length ?? 0;
      try {
        await waitFor('three redraws', () => (redraws() >= 3 ? true : undefined), {
          timeoutMs: 60_000,
          intervalMs: 100,
          lastSeen: () => JSON.stringify(screen),
        });
      } finally {
        child.stdin.write('\u0003'); // Ctrl-C: the terminal sends SIGINT to the command
      }
      expect(await exited).toBe(0);
      expect(screen).toContain('\u001b[?25l');
      expect(screen.lastIndexOf('\u001b[?25h')).toBeGreaterThan(screen.lastIndexOf('\u001b[J'));
      const lastFrame = screen.slice(screen.lastIndexOf('\u001b[J') + 3);
      // The id in bold (a terminal without NO_COLOR), then the status and the interval.
      expect(lastFrame).toMatch(new RegExp(`${ESC}\\[1m${instanceId}${ESC}\\[22m\\s+running\\s+every 1 s`));
      expect(lastFrame).toMatch(/cpu_percent\s+\d+\.\d%\s+[▁▂▃▄▅▆▇█]+/);
      expect(lastFrame).toMatch(/memory_used_bytes\s+\d+\.\d (MiB|GiB)/);
      // Every frame's lines fit the 100 columns, so none wraps and each redraw goes back exactly over the last.
      const visible = (line: string) =>
        line.replace(new RegExp(`${ESC}\\[[\\d;?]*[A-Za-z]`, 'g'), '').replace(/\r$/, '');
      for (const line of screen.split('\n')) expect(visible(line).length).toBeLessThanOrEqual(100);
      expect(screen.split('\n').filter((line) => line.includes('(Ctrl-C to stop)')).length).toBe(
        redraws() + 1,
      );
    }, 240_000);

    it('a refused stream is one error line with its close code and the matching exit code', async () => {
      const missing = await cli.run('metrics', 'watch', 'ins_doesnotexist');
      expectErrorLine(missing, 4, /^Error: metric stream closed: .* \(code: not_found, close code: 4404/);
      const badKey = await cli
        .with({ NIMBUS_API_KEY: `nmb_${'x'.repeat(43)}` })
        .run('metrics', 'watch', instanceId);
      expectErrorLine(badKey, 3, /code: authentication_failed, close code: 4401/);
      const untrusted = await cli.with({ NIMBUS_CA_FILE: undefined }).run('metrics', 'watch', instanceId);
      expect(untrusted.code, untrusted.stderr).toBe(3);
      expect(untrusted.stderr).toMatch(/cannot reach .*self.signed certificate/i);
      const pinnedWrong = await cli
        .with({ NIMBUS_CA_FILE: undefined, NIMBUS_TLS_FINGERPRINT: 'AB'.repeat(32) })
        .run('metrics', 'watch', instanceId);
      expect(pinnedWrong.code, pinnedWrong.stderr).toBe(3);
      expect((await cli.run('metrics', 'watch', 'web-1', '--count', '0')).code).toBe(2);
    }, 240_000);
  });

  describe('billing', () => {
    it('usage: JSON equal to the API, a table of lines with the total, grouped by day', async () => {
      const end = new Date().toISOString();
      const start = new Date(Date.now() - 3_600_000).toISOString();
      const json = await cli.json('billing', 'usage', '--start', start, '--end', end);
      const api = await server.request(
        'GET',
        `/v1/billing/usage?start=${encodeURIComponent(start)}&end=${encodeURIComponent(end)}`,
        { key },
      );
      // as_of is the moment each answer was computed.
      const { as_of: asOf, ...rest } = json;
      const { as_of: _apiAsOf, ...apiRest } = api.body.data;
      expect(rest).toEqual(apiRest);
      expect(Date.parse(asOf)).not.toBeNaN();
      expect(json.line_items.map((line: { resource_id: string }) => line.resource_id)).toContain(instanceId);

      const table = await cli.run('billing', 'usage');
      expect(table.code, table.stderr).toBe(0);
      const lines = table.stdout.trim().split('\n');
      expect(lines[0]!.split(/\s{2,}/)).toEqual([
        'RESOURCE',
        'METER',
        'DESCRIPTION',
        'QUANTITY',
        'UNIT PRICE',
        'AMOUNT',
      ]);
      expect(lines.find((line) => line.startsWith(instanceId))).toMatch(
        /instance_compute .* [\d.]+ hour\s+0\.10\s+\d+\.\d{2,6}$/,
      );
      expect(lines.at(-1)).toMatch(/^Total \d+\.\d{2,} USD \(exact \d+\.\d{2,}\), \S+ to \S+, as of \S+$/);

      const byDay = await cli.run('billing', 'usage', '--group-by', 'day');
      expect(byDay.stdout.split('\n')[0]).toMatch(/^DAY\s+METER/);
      expect(byDay.stdout).toContain(new Date().toISOString().slice(0, 10));
      expect((await cli.run('billing', 'usage', '--group-by', 'week')).code).toBe(2);
    }, 240_000);

    it('invoices: the running month as a draft, listed, shown with its lines, downloaded as PDF and CSV', async () => {
      const period = new Date().toISOString().slice(0, 7);
      const listed = await cli.json('billing', 'invoices', 'list');
      expect(listed).toEqual([expect.objectContaining({ status: 'draft', period, number: null })]);
      const invoiceId: string = listed[0].id;
      expect(invoiceId).toMatch(/^inv_/);
      const table = await cli.run('billing', 'invoices', 'list', '--status', 'draft');
      expect(table.stdout.split('\n')[0]!.split(/\s{2,}/)).toEqual([
        'ID',
        'NUMBER',
        'PERIOD',
        'STATUS',
        'TOTAL',
        'DUE',
      ]);
      expect(table.stdout).toMatch(
        new RegExp(`^${invoiceId}\\s+-\\s+${period}\\s+draft\\s+\\d+\\.\\d{2} USD\\s+-$`, 'm'),
      );
      expect(await cli.json('billing', 'invoices', 'list', '--status', 'paid')).toEqual([]);

      const invoice = await cli.json('billing', 'invoices', 'get', invoiceId);
      expect(invoice).toMatchObject({ id: invoiceId, status: 'draft', line_items: expect.any(Array) });
      const shown = await cli.run('billing', 'invoices', 'get', invoiceId);
      expect(shown.stdout).toMatch(/^FIELD\s+VALUE\nid\s+inv_/);
      expect(shown.stdout).toMatch(/\n\nRESOURCE\s+METER\s+DESCRIPTION/);
      expect(shown.stdout).toContain(instanceId);

      const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-invoices-'));
      const pdf = await cli.runIn(dir, 'billing', 'invoices', 'download', invoiceId, '--format', 'pdf');
      expect(pdf.code, pdf.stderr).toBe(0);
      // Saved under the name the server gives it, in the current directory.
      const [saved] = readdirSync(dir);
      expect(saved).toMatch(/\.pdf$/);
      expect(pdf.stdout).toMatch(
        new RegExp(`^Saved ${invoiceId} \\(PDF, \\d+ bytes\\) to ${saved!.replace('.', '\\.')}`),
      );
      expect(readFileSync(path.join(dir, saved!)).subarray(0, 5).toString()).toBe('%PDF-');

      const csvFile = path.join(dir, 'march.csv');
      const csv = await cli.json(
        'billing',
        'invoices',
        'download',
        invoiceId,
        '--format',
        'csv',
        '--out',
        csvFile,
      );
      expect(csv).toMatchObject({
        id: invoiceId,
        file: csvFile,
        content_type: expect.stringMatching(/^text\/csv/),
      });
      const rows = parseCsv(readFileSync(csvFile, 'utf8'), { columns: true }) as Record<string, string>[];
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.some((row) => Object.values(row).includes(instanceId))).toBe(true);
      expect(csv.bytes).toBe(readFileSync(csvFile).length);

      const toStdout = await cli.run('billing', 'invoices', 'download', invoiceId, '--out', '-');
      expect(toStdout.stdout.startsWith('%PDF-')).toBe(true);
      expectErrorLine(
        await cli.run('billing', 'invoices', 'download', 'inv_doesnotexist', '--out', csvFile),
        4,
        'not_found',
      );
      expect((await cli.run('billing', 'invoices', 'download', invoiceId, '--format', 'docx')).code).toBe(2);
    }, 240_000);

    it('estimate: JSON equal to the API, the breakdown with its total, and the API’s 400', async () => {
      const json = await cli.json(
        'billing',
        'estimate',
        '--type',
        'compute-2x',
        '--count',
        '3',
        '--hours',
        '730',
        '--region',
        'us-east-1',
        '--volume-gb',
        '100',
      );
      const api = await server.request(
        'GET',
        '/v1/billing/estimate?instance_type=compute-2x&count=3&hours=730&region=us-east-1&volume_gb=100',
        { key },
      );
      expect(json).toEqual(api.body.data);
      // 3 × $0.10 × 730 h, and 100 GB of volumes for a month at $0.10 per GB-month.
      expect(json.total).toBe(229);
      const table = await cli.run(
        'billing',
        'estimate',
        '--type',
        'compute-2x',
        '--count',
        '3',
        '--region',
        'us-east-1',
      );
      expect(table.code, table.stderr).toBe(0);
      const lines = table.stdout.trim().split('\n');
      expect(lines[0]!.split(/\s{2,}/)).toEqual(['ITEM', 'DESCRIPTION', 'QUANTITY', 'UNIT PRICE', 'AMOUNT']);
      expect(lines[1]).toMatch(/^instances\s+.*2190 hour\s+0\.10\s+219\.00$/);
      expect(lines.at(-1)).toBe('Total 219.00 USD (3 × compute-2x in us-east-1, 730 h)');
      expectErrorLine(await cli.run('billing', 'estimate', '--type', 'compute-3x'), 1, 'invalid_request');
      expect((await cli.run('billing', 'estimate')).code).toBe(2);
    }, 240_000);
  });
});
