/**
 * The console's Alerts, Webhooks, Billing and Settings pages in a real browser (Debian's chromium,
 * headless, through playwright-core) against the real HTTPS server on a manual clock: May's usage is
 * closed into an invoice whose PDF the Billing page downloads (fetched with the key, saved from a Blob
 * URL); the estimate calculator prices a plan; an SSH key is added by pasting it and the account's quotas
 * show as bars; a webhook is created (its secret shown once), sent a test that reaches a real receiver
 * and shows in its delivery log; an alert policy is created, fires for an instance whose CPU the simulator pins, is disabled (which
 * resolves the incident) and deleted. axe-core runs on every
 * page (no serious or critical violation), and each page is screenshot to
 * test-results/console-screenshots/, also at 375 px in dark mode.
 *
 * Browser, sign-in, axe-core and screenshots: test/helpers/console.ts (under CI=true the suite fails
 * without chromium; elsewhere it skips).
 */
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/domain/clock.js';
import {
  type ConsoleBrowser,
  checkAccessibility as checkPage,
  describeInChromium,
  horizontalOverflow,
  narrowAndDark,
  openConsoleBrowser,
  screenshot as screenshotOf,
  signIn,
} from './helpers/console.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.js';

const SSH_KEY =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRb9olYCpSGsNwvNt3+sWeG618K2x4QXKOmIIiBqnY7 fixed@vector';
/** Late on May 31st: a volume created now pays two hours of May, which closes on June 1st. */
const MAY_31 = new Date('2026-05-31T22:00:00Z');

describeInChromium('console account and billing pages in Chromium', () => {
  const clock = new ManualClock(MAY_31);
  let server: TestServer;
  let receiver: Receiver;
  let chromium: ConsoleBrowser;
  let page: Page;
  let user: { id: string; key: string };

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await startTestServer({
      clock,
      steppedJobs: true,
      env: { NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1', NIMBUS_WEBHOOK_CA_FILE: receiver.caFile },
    });
    // The clock stands still, so the rate-limit budget never refills: give the browser room.
    user = await server.createAccount({ perHour: 100_000, burst: 5_000 });
    const volume = await server.request('POST', '/v1/volumes', {
      key: user.key,
      body: { name: 'data-may', size_gb: 50, region: 'us-east-1' },
    });
    expect(volume.status, volume.text).toBe(202);
    // The operator closes May (steppedJobs: the period job runs only when asked, so this is the close).
    clock.set(new Date('2026-06-01T01:00:00Z'));
    const closed = await server.admin<{ periods: string[] }>('close-period');
    expect(closed.periods).toContain('2026-05');

    chromium = await openConsoleBrowser({ acceptDownloads: true });
    page = chromium.page;
    await signIn(page, server.url, user.key);
  }, 60_000);

  afterAll(async () => {
    await chromium?.browser.close();
    await server?.close();
    await receiver?.close();
  });

  const checkAccessibility = (name: string) => checkPage(page, name);

  /** Runs every due job and webhook delivery until nothing is due (the clock is the test's). */
  async function settle(): Promise<void> {
    for (let round = 0; round < 100; round++) {
      const jobs = await server.running.backends.jobs.runDue();
      const deliveries = await server.running.backends.services.deliveries.runDue();
      if (jobs === 0 && deliveries === 0) return;
    }
    throw new Error('jobs kept coming due');
  }

  const screenshot = (name: string) => screenshotOf(page, name);
  const open = async (label: string) => {
    await page.getByRole('link', { name: label, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
  };

  it('Billing: usage, the closed invoice downloaded as a PDF, and an estimate', async () => {
    await open('Billing');
    await page
      .getByRole('cell', { name: /data-may/ })
      .first()
      .waitFor();
    const pdfButton = page.getByRole('button', { name: 'Download invoice NMB-000001 as PDF' });
    const [download] = await Promise.all([page.waitForEvent('download'), pdfButton.click()]);
    expect(download.suggestedFilename()).toBe('nimbus-invoice-NMB-000001.pdf');
    const file = await download.path();
    expect(readFileSync(file).subarray(0, 5).toString('latin1')).toBe('%PDF-');

    await page.getByLabel('Instance type').selectOption('compute-2x');
    await page.getByLabel('Instances', { exact: true }).fill('3');
    await page.getByLabel('VPN gateways').fill('1');
    await page.getByRole('button', { name: 'Estimate', exact: true }).click();
    const expected = await server.request(
      'GET',
      '/v1/billing/estimate?instance_type=compute-2x&count=3&hours=730&volume_gb=0&snapshot_gb=0&vpn_count=1',
      { key: user.key },
    );
    expect(expected.status, expected.text).toBe(200);
    await page.getByText(`Estimate: $${expected.body.data.total.toFixed(2)}`).waitFor();
    await checkAccessibility('billing');
    await screenshot('billing');
  });

  it('Settings: an SSH key added by pasting it, and the account with its quotas', async () => {
    await open('Settings');
    await page.getByRole('heading', { name: 'API Keys' }).waitFor();
    await page.getByRole('link', { name: 'SSH Keys' }).click();
    await page.getByText('No SSH keys').waitFor();
    await page.getByRole('button', { name: 'Add SSH key' }).click();
    await page.getByLabel('Key name').fill('laptop');
    await page.getByLabel('Public key').fill('ssh-ed25519 not-a-key');
    await page.getByRole('button', { name: 'Add key', exact: true }).click();
    await page
      .getByRole('alert')
      .getByText(/Request id: req_/)
      .waitFor();
    await page.getByLabel('Public key').fill(SSH_KEY);
    await page.getByRole('button', { name: 'Add key', exact: true }).click();
    await page.getByRole('cell', { name: 'laptop', exact: true }).waitFor();
    const listed = await server.request('GET', '/v1/ssh-keys', { key: user.key });
    expect(listed.body.data.map((k: { name: string }) => k.name)).toEqual(['laptop']);
    await page.getByRole('cell', { name: listed.body.data[0].fingerprint }).waitFor();
    await checkAccessibility('settings: SSH keys');
    await screenshot('settings-ssh-keys');

    await page.getByRole('link', { name: 'Account', exact: true }).click();
    await page.getByRole('progressbar', { name: /Volumes: 1 of \d+ used/ }).waitFor();
    await page.getByLabel('Company (on invoices)').fill('Acme Console Ltd');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    expect((await server.request('GET', '/v1/account', { key: user.key })).body.data.company).toBe(
      'Acme Console Ltd',
    );
    await checkAccessibility('settings: account');
    await screenshot('settings-account');
  });

  it('Webhooks: created with its secret shown once, a test reaching the receiver, the log and a redelivery', async () => {
    await open('Webhooks');
    await page.getByText('No webhooks').waitFor();
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const url = `${receiver.origin}/hook`;
    await page.getByLabel('Receiver URL').fill(url);
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    const secretBox = page.getByRole('textbox', { name: 'Signing secret' });
    await secretBox.waitFor();
    expect(await secretBox.inputValue()).toMatch(/^whsec_/);
    await page.getByText('it will not be shown again').waitFor();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    expect(await secretBox.count()).toBe(0);

    await page.getByRole('button', { name: `Send test to ${url}` }).click();
    await page
      .getByRole('status')
      .getByText(/succeeded \(HTTP 200\)/)
      .waitFor();
    expect(receiver.receivedAt('/hook').map((r) => JSON.parse(r.body).type)).toEqual(['webhook.test']);
    const log = page.getByRole('table', { name: `Deliveries to ${url}` });
    await log.getByRole('cell', { name: 'webhook.test', exact: true }).waitFor();
    await log.getByRole('button', { name: /^Redeliver webhook.test/ }).click();
    await expect.poll(() => log.getByRole('row').count()).toBe(3);
    await log.getByText('pending').waitFor();
    await checkAccessibility('webhooks');
    await screenshot('webhooks');
  });

  it('Alerts: a policy created with the webhook as its channel fires, is disabled (resolving it), then deleted', async () => {
    // An instance tagged env=prod whose CPU the simulator pins at 95: once a 5 m window of samples
    // covers it, the policy made below fires.
    const created = await server.request('POST', '/v1/instances', {
      key: user.key,
      body: {
        name: 'web-hot',
        instance_type: 'compute-1x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
        tags: { env: 'prod', 'nimbus.sim/metrics': 'cpu_percent=95' },
      },
    });
    expect(created.status, created.text).toBe(202);
    await open('Alerts');
    await page.getByText('No alert policies').waitFor();
    await page.getByRole('button', { name: 'Create alert policy' }).click();
    await page.getByLabel('Policy name').fill('cpu-high');
    await page.getByLabel('Threshold', { exact: true }).fill('90');
    await page.getByLabel('Only instances tagged (optional)').fill('env=prod');
    await page.getByRole('checkbox', { name: 'web-hot' }).check();
    await page.getByRole('button', { name: 'Create policy' }).click();
    // No channel yet: the API's own message, with its request id.
    await page
      .getByRole('alert')
      .getByText(/Request id: req_/)
      .waitFor();
    await page.getByLabel(/^Webhook https:/).check();
    await checkAccessibility('alerts: create form');
    await page.getByRole('button', { name: 'Create policy' }).click();
    const row = page.getByRole('row', { name: /cpu-high/ });
    await row.getByText('CPU above 90% over 5m').waitFor();
    await row.getByText('enabled', { exact: true }).waitFor();

    for (let collection = 0; collection < 32; collection++) {
      clock.advance(10_000);
      await settle();
    }
    const incidents = page.getByRole('table', { name: 'Alert incidents' });
    // No reload nor refresh: the page hears of the incident on its stream.
    await incidents.getByRole('row', { name: /firing.*cpu-high.*web-hot/ }).waitFor();
    await page.getByLabel('Status', { exact: true }).selectOption('firing');
    await incidents.getByRole('row', { name: /web-hot/ }).waitFor();
    await checkAccessibility('alerts: firing');
    await screenshot('alerts-firing');

    // Disabling resolves the open incident.
    await row.getByRole('button', { name: 'Disable cpu-high' }).click();
    await row.getByText('disabled', { exact: true }).waitFor();
    const policies = await server.request('GET', '/v1/alerts', { key: user.key });
    expect(policies.body.data.map((p: { enabled: boolean }) => p.enabled)).toEqual([false]);
    expect(policies.body.data[0].targets).toEqual({
      instance_ids: [created.body.data.id],
      tags: { env: 'prod' },
    });
    await page.getByLabel('Status', { exact: true }).selectOption('resolved');
    await incidents.getByRole('row', { name: /resolved.*web-hot.*policy_disabled/ }).waitFor();
    await checkAccessibility('alerts');
    await screenshot('alerts');

    await row.getByRole('button', { name: 'Delete cpu-high' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByText('No alert policies').waitFor();
  });

  it('every page works at 375 px in dark mode without sideways scrolling', async () => {
    await narrowAndDark(page);
    for (const label of ['Alerts', 'Webhooks', 'Billing', 'Settings']) {
      await open(label);
      await page.locator('.table-wrap, .empty').first().waitFor();
      expect(await horizontalOverflow(page), label).toBeLessThanOrEqual(0);
      await checkAccessibility(`${label} at 375 px, dark`);
      await screenshot(`${label.toLowerCase()}-375-dark`);
    }
    expect(chromium.cspViolations).toEqual([]);
  });
});
