/**
 * The web console's budgets (issue 23): the Instances page renders 100 rows in at most 100 ms in
 * Chromium, and the JavaScript of the first load is at most 250 KB gzipped.
 *
 *   node bench/console-render.mjs [--instances 1000] [--runs 20] [--warmup 3] [--no-build] [--no-write] [--keep]
 *
 * A built server (dist/, the embedded profile) on a temporary data dir whose bootstrap account is seeded
 * with --instances instances (bench/seed-instances.mjs, as the list benchmark does), Debian's chromium
 * driven by playwright-core with the browser tests' launch flags, signed in with the bootstrap key, and
 * the list set to 100 per page. Each run goes to Volumes, then clicks Instances in the navigation and
 * times, in the page (performance.now()), from the click to the `instances:rows-committed` mark that the
 * page sets when the table's rows are in the DOM (console/src/pages/instances.tsx); the list request's
 * Resource Timing splits that into waiting for the API (click to the answer's last byte) and rendering
 * (last byte to rows in the DOM: JSON, Preact's render and the DOM commit).
 *
 * The JavaScript of the first load is every script dist/console/index.html references, gzipped at -9
 * (the server sends files as they are; the figure is what gzip on a proxy would send).
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import {
  accountIdOf,
  bootstrapAuth,
  cleanUpOnExit,
  cleanup,
  fail,
  positiveInt,
  prepareRun,
  RAISED_LIMIT,
  ROOT,
  raiseLimits,
  runHeader,
  startNimbus,
  step,
  stopChild,
  tempDir,
  writeSection,
} from './lib.mjs';

const SCRIPT = 'bench/console-render.mjs';
const CHROMIUM = '/usr/bin/chromium';
// The same flags as the browser tests (test/helpers/console.ts).
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const ROWS = 100;
const TARGETS = { renderMs: 100, firstLoadJsGzipKb: 250 };
const QUOTAS = [
  ['instances', 10_000_000],
  ['vcpus', RAISED_LIMIT],
];

cleanUpOnExit();

async function main() {
  const { values } = parseArgs({
    options: {
      instances: { type: 'string', default: '1000' },
      runs: { type: 'string', default: '20' },
      warmup: { type: 'string', default: '3' },
      'no-build': { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  cleanup.keep = values.keep;
  const settings = {
    instances: positiveInt(values.instances, 'instances'),
    runs: positiveInt(values.runs, 'runs'),
    warmup: positiveInt(values.warmup, 'warmup'),
  };
  if (settings.instances < ROWS) fail(`--instances must be at least ${ROWS}`);
  const { command, loadAverage } = await prepareRun(SCRIPT, { build: !values['no-build'] });
  const { chromium } = await import('playwright-core');

  const bundle = firstLoadAssets();
  step(`first-load JavaScript: ${kb(bundle.jsGzip)} KB gzipped`);

  const dataDir = tempDir('nimbus-bench-console-');
  const logFile = path.join(dataDir, 'nimbus.log');
  let nimbus = await startNimbus(dataDir, logFile);
  const auth = bootstrapAuth(dataDir);
  const accountId = await accountIdOf(nimbus.port, auth);
  raiseLimits(dataDir, accountId, QUOTAS);
  await stopChild(nimbus.child);
  step(`seeding ${settings.instances} instances`);
  const { seedInstances } = await import(pathToFileURL(path.join(ROOT, 'bench', 'seed-instances.mjs')).href);
  await seedInstances({ dataDir, accountId, count: settings.instances });
  nimbus = await startNimbus(dataDir, logFile);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
  let runs;
  let chromiumVersion;
  try {
    chromiumVersion = browser.version();
    const context = await browser.newContext({
      ignoreHTTPSErrors: true,
      viewport: { width: 1280, height: 900 },
    });
    const page = await context.newPage();
    await page.goto(`https://127.0.0.1:${nimbus.port}/console/`);
    await page.getByLabel('API key').fill(auth.authorization.slice('Bearer '.length));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Instances', level: 1 }).waitFor();
    await page.getByLabel('Per page').selectOption(String(ROWS));
    await page.locator(`tbody tr:nth-child(${ROWS})`).waitFor();

    step(`timing the Instances page: ${settings.warmup} warm-up runs, then ${settings.runs}`);
    runs = [];
    for (let run = 0; run < settings.warmup + settings.runs; run++) {
      await page.getByRole('link', { name: 'Volumes', exact: true }).click();
      await page.getByRole('heading', { name: 'Volumes', level: 1 }).waitFor();
      const timing = await page.evaluate(timeInstancesPage, ROWS);
      if (timing.rows !== ROWS) fail(`the page committed ${timing.rows} rows, not ${ROWS}`);
      if (run >= settings.warmup) runs.push(timing);
    }
  } finally {
    await browser.close();
    await stopChild(nimbus.child);
  }

  const total = stats(runs.map((r) => r.totalMs));
  const api = stats(runs.map((r) => r.apiMs));
  const render = stats(runs.map((r) => r.renderMs));
  step(
    `click to ${ROWS} rows: p50 ${total.p50.toFixed(1)} ms, p95 ${total.p95.toFixed(1)} ms, max ${total.max.toFixed(1)} ms`,
  );
  step(
    `render only: p50 ${render.p50.toFixed(1)} ms, p95 ${render.p95.toFixed(1)} ms, max ${render.max.toFixed(1)} ms`,
  );

  const met = (ok) => (ok ? 'met' : '**not met**');
  const row = (name, s) =>
    `| ${name} | ${s.p50.toFixed(1)} ms | ${s.p95.toFixed(1)} ms | ${s.max.toFixed(1)} ms |`;
  const lines = [
    `## Web console: 100-row render and first-load JavaScript (issue 23)`,
    '',
    ...runHeader({
      loadAverage,
      command,
      npmScript: 'bench:console-render',
      generator: `Chromium ${chromiumVersion} (Debian, headless) through playwright-core`,
      machineNote:
        ' The host was shared with other agents working at the same time: the server, the browser and ' +
        'their work share its 2 cores.',
    }),
    `${settings.instances.toLocaleString('en-US')} instances in one account (seeded), the Instances page at ` +
      `${ROWS} per page; ${settings.runs} runs after ${settings.warmup} warm-up runs. Each run leaves for ` +
      `Volumes, clicks Instances and times, in the page, from the click to the mark the page sets when the ` +
      `${ROWS} rows are in the DOM; the list request's Resource Timing splits it into the API's answer ` +
      `(click to its last byte) and the render (last byte to rows in the DOM).`,
    '',
    '| from | p50 | p95 | max |',
    '|---|---|---|---|',
    row(`click to ${ROWS} rows in the DOM`, total),
    row('click to the API answer', api),
    row(`answer to ${ROWS} rows in the DOM (render)`, render),
    '',
    `Target ${TARGETS.renderMs} ms for ${ROWS} rows: ${met(total.p95 <= TARGETS.renderMs)} at p95 from the ` +
      `click (render alone: ${met(render.p95 <= TARGETS.renderMs)} at p95).`,
    '',
    'First-load assets (everything `dist/console/index.html` references; gzip -9):',
    '',
    '| asset | raw | gzipped |',
    '|---|---|---|',
    ...bundle.assets.map(
      (a) => `| \`${a.name.replace(/-[^-.]+\./, '-….')}\` | ${kb(a.raw)} KB | ${kb(a.gzip)} KB |`,
    ),
    '',
    `JavaScript on first load: ${kb(bundle.jsGzip)} KB gzipped, target ${TARGETS.firstLoadJsGzipKb} KB: ` +
      `${met(bundle.jsGzip / 1024 <= TARGETS.firstLoadJsGzipKb)}.`,
  ];
  if (values['no-write']) process.stdout.write(`${lines.join('\n')}\n`);
  else writeSection(SCRIPT, lines);
}

/**
 * Runs in the page: clicks the Instances link and resolves when the page's rows-committed mark comes,
 * with the times from the click (performance.now()).
 */
function timeInstancesPage(rows) {
  const mark = 'instances:rows-committed';
  performance.clearMarks(mark);
  performance.clearResourceTimings();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no rows-committed mark within 10 s')), 10_000);
    const observer = new PerformanceObserver((list) => {
      const committed = list.getEntriesByName(mark).find((entry) => entry.detail?.rows === rows);
      if (!committed) return;
      observer.disconnect();
      clearTimeout(timer);
      const request = performance
        .getEntriesByType('resource')
        .filter((entry) => entry.name.includes('/v1/instances?'))
        .at(-1);
      resolve({
        rows: document.querySelectorAll('tbody tr').length,
        totalMs: committed.startTime - start,
        apiMs: request ? request.responseEnd - start : Number.NaN,
        renderMs: request ? committed.startTime - request.responseEnd : Number.NaN,
      });
    });
    observer.observe({ type: 'mark' });
    const link = [...document.querySelectorAll('nav a')].find((a) => a.textContent === 'Instances');
    const start = performance.now();
    link.click();
  });
}

function firstLoadAssets() {
  const dist = path.join(ROOT, 'dist');
  const html = readFileSync(path.join(dist, 'console', 'index.html'), 'utf8');
  const names = [...html.matchAll(/\/console\/assets\/[^"]+/g)].map((m) => m[0]);
  if (names.length === 0) fail('dist/console/index.html references no assets: run npm run build');
  const assets = names.map((name) => {
    const file = path.join(dist, name);
    return {
      name: path.basename(name),
      raw: statSync(file).size,
      gzip: gzipSync(readFileSync(file), { level: 9 }).length,
    };
  });
  const jsGzip = assets.filter((a) => a.name.endsWith('.js')).reduce((sum, a) => sum + a.gzip, 0);
  return { assets, jsGzip };
}

function stats(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  return { p50: at(0.5), p95: at(0.95), max: sorted.at(-1) };
}

const kb = (bytes) => (bytes / 1024).toFixed(1);

main().catch((error) => fail(error.stack ?? String(error)));
