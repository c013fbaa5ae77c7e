/**
 * The console's Alerts page is live (issue 23, item 4): in a real browser (Debian's chromium, headless,
 * through playwright-core) against the real HTTPS server on a manual clock, an instance whose CPU the
 * simulator pins above a policy's threshold makes an incident that appears on the open page without a
 * reload, and resolves there when the CPU comes back — from the alert messages of the account's live
 * stream, not by polling: the page asks the API for incidents again only after a message came.
 * axe-core on the page at each step (no serious or critical violation); screenshots to
 * test-results/console-screenshots/ (alerts-live-*.png), also at 375 px in dark mode.
 *
 * Browser, sign-in, axe-core and screenshots: test/helpers/console.ts (under CI=true the suite fails
 * without chromium; elsewhere it skips).
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import { waitFor } from './helpers/common.js';
import {
  type ConsoleBrowser,
  checkAccessibility,
  checkNarrowDark,
  describeInChromium,
  openConsoleBrowser,
  screenshot,
  signIn,
  wideAndLight,
} from './helpers/console.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { type SmtpRelay, startSmtpRelay } from './helpers/smtp-relay.js';

const PIN = 'nimbus.sim/metrics';
/** Seconds between collections: a 1 m window is covered after six or seven. */
const INTERVAL_S = 10;

type Json = Record<string, any>;

describeInChromium('console Alerts page: incidents live from the stream', () => {
  const clock = new ManualClock(new Date('2026-04-06T12:00:00Z'));
  let relay: SmtpRelay;
  let server: TestServer;
  let chromium: ConsoleBrowser;
  let page: Page;
  let user: { id: string; key: string };
  /**
   * What the page did, in order: `read` for each GET /v1/alerts/incidents it sent, `alert.firing` /
   * `alert.resolved` for each alert message its stream received.
   */
  const seen: string[] = [];

  beforeAll(async () => {
    relay = await startSmtpRelay();
    server = await startTestServer({
      clock,
      steppedJobs: true,
      env: {
        NIMBUS_SIM_SPEEDUP: '1',
        NIMBUS_METRICS_INTERVAL_SECONDS: String(INTERVAL_S),
        NIMBUS_SMTP_URL: relay.url,
      },
    });
    // The clock stands still, so the rate-limit budget never refills: give the browser room.
    user = await server.createAccount({ perHour: 100_000, burst: 5_000 });
    chromium = await openConsoleBrowser();
    page = chromium.page;
    page.on('request', (request) => {
      if (new URL(request.url()).pathname === '/v1/alerts/incidents') seen.push('read');
    });
    page.on('websocket', (socket) =>
      socket.on('framereceived', ({ payload }) => {
        const message = JSON.parse(String(payload)) as Json;
        if (message.type === 'alert') seen.push(message.event);
      }),
    );
    await signIn(page, server.url, user.key);
  }, 60_000);

  afterAll(async () => {
    await chromium?.browser.close();
    await server?.close();
    await relay?.close();
  });

  /** Runs every due job until nothing is due (the clock is the test's). */
  async function settle(): Promise<void> {
    for (let round = 0; round < 100; round++) {
      if ((await server.running.backends.jobs.runDue()) === 0) return;
    }
    throw new Error('jobs kept coming due');
  }
  /** One collection: the clock moves one interval and every due job runs. */
  async function tick(): Promise<void> {
    clock.advance(INTERVAL_S * 1000);
    await settle();
  }
  async function incidents(policyId: string): Promise<Json[]> {
    const reply = await server.request('GET', `/v1/alerts/${policyId}/incidents`, { key: user.key });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data;
  }
  /** Collections until `found` picks an incident out of the API's answer (at most `limit` of them). */
  async function tickUntil(policyId: string, limit: number, found: (rows: Json[]) => Json | undefined) {
    for (let i = 0; i < limit; i++) {
      await tick();
      const incident = found(await incidents(policyId));
      if (incident) return incident;
    }
    throw new Error(`no such incident within ${limit} collections`);
  }
  /** Set in the page: a reload or a navigation away would lose it. */
  const mark = () => page.evaluate(() => Object.assign(globalThis, { nimbusTestMark: 'same page' }));
  const marked = () =>
    page.evaluate(() => (globalThis as unknown as { nimbusTestMark?: string }).nimbusTestMark);

  it('an incident opens and resolves on the open page, from the stream', async () => {
    const created = await server.request('POST', '/v1/instances', {
      key: user.key,
      body: {
        name: 'web-hot',
        instance_type: 'compute-1x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
        tags: { [PIN]: 'cpu_percent=95' },
      },
    });
    expect(created.status, created.text).toBe(202);
    const instanceId = created.body.data.id as string;
    await settle();
    await tick();
    const running = await server.request('GET', `/v1/instances/${instanceId}`, { key: user.key });
    expect(running.body.data.status).toBe('running');
    const policy = await server.request('POST', '/v1/alerts', {
      key: user.key,
      body: {
        name: 'Hot CPU',
        metric: 'cpu_percent',
        compare: 'above',
        threshold: 80,
        window: '1m',
        channels: { email: ['oncall@example.com'] },
      },
    });
    expect(policy.status, policy.text).toBe(201);
    const policyId = policy.body.data.id as string;

    await page.getByRole('link', { name: 'Alerts', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Alerts' }).waitFor();
    await page.getByText('No incidents').waitFor();
    // The page's stream is open and ready (the banner says so until then).
    const streams = server.running.backends.services.metricStreams;
    await waitFor('the page to open its stream', () => (streams.openStreams > 0 ? true : undefined));
    await page.getByText('Connecting to live updates…').waitFor({ state: 'detached' });
    await mark();
    expect(seen, 'the page read its incidents once, when it opened').toEqual(['read']);

    // Collections until the API has the incident; the clock then stands still.
    const firing = await tickUntil(policyId, 12, (rows) => rows.find((r) => r.status === 'firing'));
    const table = page.getByRole('table', { name: 'Alert incidents' });
    await table.getByRole('row', { name: /firing.*Hot CPU.*web-hot.*95 \(threshold 80\)/ }).waitFor();
    await page.getByRole('status').getByText('Hot CPU is firing on web-hot (value 95).').waitFor();
    expect(await marked(), 'no reload').toBe('same page');
    // The page asked for incidents again only once the message had come (no polling meanwhile).
    await waitFor('the read after the message', () => (seen.length >= 3 ? true : undefined));
    expect(seen).toEqual(['read', 'alert.firing', 'read']);
    expect(firing.value).toBe(95);
    await checkAccessibility(page, 'alerts: live incident firing');
    await screenshot(page, 'alerts-live-firing');

    // The CPU comes back: the incident resolves after a whole good window, on the page too.
    const cooled = await server.request('PATCH', `/v1/instances/${instanceId}`, {
      key: user.key,
      body: { tags: { [PIN]: 'cpu_percent=10' } },
    });
    expect(cooled.status, cooled.text).toBe(200);
    await tickUntil(policyId, 15, (rows) => rows.find((r) => r.status === 'resolved'));
    // The row turns resolved from the message, then the API's answer adds the resolution.
    await table.getByRole('row', { name: /resolved.*Hot CPU.*web-hot.*\(recovered\)/ }).waitFor();
    await page.getByRole('status').getByText('Hot CPU resolved on web-hot (value 10).').waitFor();
    expect(await table.getByRole('row').count(), 'one incident and the header row').toBe(2);
    expect(await marked(), 'no reload').toBe('same page');
    expect(seen).toEqual(['read', 'alert.firing', 'read', 'alert.resolved', 'read']);
    await checkAccessibility(page, 'alerts: live incident resolved');
    await screenshot(page, 'alerts-live-resolved');
    await checkNarrowDark(page, 'alerts-live-resolved');
    await wideAndLight(page);
    expect(chromium.cspViolations).toEqual([]);
  });
});
