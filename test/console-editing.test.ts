/**
 * The console's editing actions in a real browser (Debian's chromium, headless, through playwright-core)
 * against the real HTTPS server: a firewall rule edited from its row (the dialog pre-filled, the API's
 * refusal shown with its request id, only the changed fields sent), a webhook's signing secret rotated
 * (the new secret shown once with the overlap, and a test delivery signed by both secrets), and an
 * instance renamed and given new tags, firewall preset, monitoring and backups from its detail page. Each
 * dialog is opened from the keyboard, passes axe-core (no serious or critical violation), closes on
 * Escape, and is screenshot to test-results/console-screenshots/ (also at 375 px in dark mode).
 *
 * Browser, sign-in, axe-core and screenshots: test/helpers/console.ts (under CI=true the suite fails
 * without chromium; elsewhere it skips).
 */
import { createHmac } from 'node:crypto';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { account } from './helpers/common.js';
import {
  type ConsoleBrowser,
  checkNarrowDark,
  checkAccessibility as checkPage,
  closeDialogWithEscape,
  describeInChromium,
  openConsoleBrowser,
  openDialogByKeyboard,
  screenshot,
  signIn,
  wideAndLight,
} from './helpers/console.js';
import { createInstance, waitForStatus } from './helpers/instances.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.js';

describeInChromium('console editing actions in Chromium', () => {
  let server: TestServer;
  let receiver: Receiver;
  let chromium: ConsoleBrowser;
  let page: Page;
  let user: { id: string; key: string };
  let web: { id: string; name: string };

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await startTestServer({
      env: {
        NIMBUS_SIM_SPEEDUP: '4',
        NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
        NIMBUS_WEBHOOK_CA_FILE: receiver.caFile,
      },
    });
    user = await account(server);
    const instance = await createInstance(server, user.key, { name: 'edit-me', tags: { env: 'dev' } });
    web = { id: instance.id, name: instance.name };
    await waitForStatus(server, user.key, web.id, 'running', 20_000);
    chromium = await openConsoleBrowser();
    page = chromium.page;
    await signIn(page, server.url, user.key);
  }, 60_000);

  afterAll(async () => {
    await chromium?.browser.close();
    await server?.close();
    await receiver?.close();
  });

  const api = async (method: string, path: string, body?: unknown) => {
    const reply = await server.request(method, path, { key: user.key, body });
    expect(reply.status, reply.text).toBeLessThan(300);
    return reply.body.data;
  };
  const open = async (label: string) => {
    await page.getByRole('link', { name: label, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: label }).waitFor();
  };

  /** axe and a screenshot of the open dialog, then the same at 375 px in dark mode, back to wide. */
  async function checkDialog(name: string): Promise<void> {
    await checkPage(page, `${name} dialog`);
    await screenshot(page, `dialog-${name}`);
    await checkNarrowDark(page, `dialog-${name}`);
    await wideAndLight(page);
  }

  /** The API's refusal inside the dialog: its message and the request id. */
  async function expectRefusal(dialog: Locator, message: RegExp): Promise<void> {
    const alert = dialog.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(message);
    expect(await alert.textContent()).toMatch(/Request id: req_/);
  }

  it('edits a firewall rule from its row: pre-filled, refusals shown, only the changed fields sent', async () => {
    const rule = await api('POST', '/v1/firewall/rules', {
      name: 'allow-web',
      direction: 'inbound',
      action: 'allow',
      protocol: 'tcp',
      ports: '80',
      sources: ['203.0.113.0/24'],
      priority: 500,
      region: 'us-east-1',
      targets: { tags: { role: 'web' } },
    });
    await open('Networking');
    const row = page.getByRole('row', { name: /^allow-web / });
    await row.waitFor();

    // Escape closes the dialog and changes nothing.
    const edit = page.getByRole('button', { name: 'Edit rule allow-web' });
    let dialog = await openDialogByKeyboard(page, edit, 'Edit rule allow-web');
    await closeDialogWithEscape(page, dialog, edit);

    dialog = await openDialogByKeyboard(page, edit, 'Edit rule allow-web');
    expect(await dialog.getByLabel('Name').inputValue()).toBe('allow-web');
    expect(await dialog.getByLabel('Ports').inputValue()).toBe('80');
    expect(await dialog.getByLabel(/Sources/).inputValue()).toBe('203.0.113.0/24');
    expect(await dialog.getByLabel('Priority').inputValue()).toBe('500');
    expect(await dialog.getByLabel('Only instances tagged (optional)').inputValue()).toBe('role=web');
    expect(await dialog.getByLabel('Action').inputValue()).toBe('allow');
    expect(await dialog.getByLabel('Description (optional)').inputValue()).toBe('');
    expect(await dialog.getByRole('checkbox', { name: /Enabled/ }).isChecked()).toBe(true);
    expect(await dialog.getByRole('combobox', { name: 'Region' }).count()).toBe(0);
    await checkDialog('edit-firewall-rule');

    // A block with host bits set is the API's to refuse; the dialog stays open with the message.
    await dialog.getByLabel(/Sources/).fill('10.0.0.7/8');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expectRefusal(dialog, /10\.0\.0\.0\/8/);

    await dialog.getByLabel(/Sources/).fill('198.51.100.0/24');
    await dialog.getByLabel('Ports').fill('8080');
    await dialog.getByLabel('Description (optional)').fill('web servers');
    await dialog.getByLabel('Action').selectOption('deny');
    await dialog.getByRole('checkbox', { name: /Enabled/ }).uncheck();
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => dialog.count()).toBe(0);
    await expect.poll(() => row.textContent()).toMatch(/web servers.*deny.*8080.*198\.51\.100\.0\/24.*no/);

    expect(await api('GET', `/v1/firewall/rules/${rule.id}`)).toMatchObject({
      name: 'allow-web',
      description: 'web servers',
      action: 'deny',
      ports: '8080',
      sources: ['198.51.100.0/24'],
      priority: 500,
      enabled: false,
      targets: { tags: { role: 'web' }, instance_ids: [] },
    });
    const updates = await api('GET', `/v1/events?type=firewall_rule.updated&resource_id=${rule.id}`);
    expect(updates).toHaveLength(1);
    expect([...updates[0].data.changed].sort()).toEqual([
      'action',
      'description',
      'enabled',
      'ports',
      'sources',
    ]);
    await checkPage(page, 'networking after an edit');
  });

  it("rotates a webhook's secret: the new one shown once with the overlap, and both sign a test", async () => {
    const url = `${receiver.origin}/rotated`;
    const hook = await api('POST', '/v1/webhooks', { url, events: ['*'] });
    const oldSecret: string = hook.secret;
    await open('Webhooks');
    const rotate = page.getByRole('button', { name: `Rotate secret of ${url}` });
    const title = `Rotate the signing secret of ${url}`;

    let dialog = await openDialogByKeyboard(page, rotate, title);
    await closeDialogWithEscape(page, dialog, rotate);

    dialog = await openDialogByKeyboard(page, rotate, title);
    expect(await dialog.getByLabel('Overlap (hours)').inputValue()).toBe('24');
    await checkDialog('rotate-webhook-secret');

    // A secret of 20 non-ASCII characters passes the browser's length check; the API refuses it.
    await dialog.getByLabel('Your own secret (optional)').fill('é'.repeat(20));
    await dialog.getByRole('button', { name: 'Rotate secret' }).click();
    await expectRefusal(dialog, /secret/i);

    await dialog.getByLabel('Your own secret (optional)').fill('');
    await dialog.getByLabel('Overlap (hours)').fill('2');
    const asked = Date.now();
    await dialog.getByRole('button', { name: 'Rotate secret' }).click();
    const secretBox = page.getByRole('textbox', { name: 'New signing secret' });
    await secretBox.waitFor();
    const newSecret = await secretBox.inputValue();
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(oldSecret);
    const panel = page.getByRole('region', { name: 'Your rotated webhook signing secret' });
    expect(await panel.textContent()).toMatch(/it will not be shown again/);
    expect(await panel.textContent()).toMatch(/Until .* both the previous and the new secret/);
    await page.getByRole('button', { name: 'Copy secret' }).waitFor();
    await checkPage(page, 'webhooks with a rotated secret');
    await screenshot(page, 'webhook-secret-rotated');

    const stored = await api('GET', `/v1/webhooks/${hook.id}`);
    const until = Date.parse(stored.previous_secret_expires_at);
    expect(until - asked).toBeGreaterThan(2 * 3600_000 - 60_000);
    expect(until - asked).toBeLessThan(2 * 3600_000 + 60_000);

    // A test delivery carries both signatures, the new secret's first.
    await page.getByRole('button', { name: `Send test to ${url}` }).click();
    await page
      .getByRole('status')
      .getByText(/succeeded \(HTTP 200\)/)
      .waitFor();
    const [delivery] = receiver.receivedAt('/rotated');
    const sign = (secret: string) =>
      `sha256=${createHmac('sha256', secret).update(delivery!.body).digest('hex')}`;
    expect(delivery!.headers['x-nimbus-signature']).toBe(`${sign(newSecret)},${sign(oldSecret)}`);

    await page.getByRole('button', { name: 'I have saved it' }).click();
    expect(await secretBox.count()).toBe(0);
    expect(await page.content()).not.toContain(newSecret);
    const row = page.getByRole('row', { name: new RegExp(`^${url} `) });
    expect(await row.textContent()).toMatch(/The previous secret also signs until/);

    // A secret of one's own, with no overlap: nothing to show once, and the old one stops signing.
    dialog = await openDialogByKeyboard(page, rotate, title);
    await dialog.getByLabel('Overlap (hours)').fill('0');
    await dialog.getByLabel('Your own secret (optional)').fill('my-own-secret-0123456789');
    await dialog.getByRole('button', { name: 'Rotate secret' }).click();
    await page
      .getByRole('status')
      .getByText(/now the one you gave\. The previous secret no longer signs anything/)
      .waitFor();
    expect(await page.getByRole('textbox', { name: 'New signing secret' }).count()).toBe(0);
    await expect.poll(() => row.textContent()).not.toMatch(/The previous secret also signs/);
    const before = receiver.receivedAt('/rotated').length;
    await page.getByRole('button', { name: `Send test to ${url}` }).click();
    await expect.poll(() => receiver.receivedAt('/rotated').length).toBe(before + 1);
    const own = receiver.receivedAt('/rotated').at(-1);
    expect(own!.headers['x-nimbus-signature']).toBe(
      `sha256=${createHmac('sha256', 'my-own-secret-0123456789').update(own!.body).digest('hex')}`,
    );
  });

  it('renames an instance and changes its tags, firewall preset, monitoring and backups from its page', async () => {
    await open('Instances');
    await page.getByRole('link', { name: web.name, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: web.name }).waitFor();
    const edit = page.getByRole('button', { name: `Edit ${web.name}` });
    const title = `Edit ${web.name}`;

    let dialog = await openDialogByKeyboard(page, edit, title);
    await closeDialogWithEscape(page, dialog, edit);

    dialog = await openDialogByKeyboard(page, edit, title);
    expect(await dialog.getByLabel('Name').inputValue()).toBe('edit-me');
    expect(await dialog.getByLabel('Tags').inputValue()).toBe('env=dev');
    expect(await dialog.getByLabel('Firewall preset').inputValue()).toBe('ssh-only');
    expect(await dialog.getByLabel('Backups', { exact: true }).inputValue()).toBe('');
    expect(await dialog.getByRole('checkbox', { name: /Monitoring/ }).isChecked()).toBe(true);
    await checkDialog('edit-instance');

    await dialog.getByLabel('Name').fill('not a name!');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await expectRefusal(dialog, /name/i);

    await dialog.getByLabel('Name').fill('edited-1');
    await dialog.getByLabel('Tags').fill('env=prod, team=web');
    await dialog.getByLabel('Firewall preset').selectOption('web');
    await dialog.getByRole('checkbox', { name: /Monitoring/ }).uncheck();
    await dialog.getByLabel('Backups', { exact: true }).selectOption('daily');
    await dialog.getByLabel('Backups kept').fill('3');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('heading', { level: 1, name: 'edited-1' }).waitFor();
    expect(await dialog.count()).toBe(0);
    const facts = await page.locator('dl.facts').textContent();
    expect(facts).toContain('env=prod, team=web');
    expect(facts).toMatch(/Firewall presetweb/);
    expect(facts).toMatch(/Monitoringoff/);
    expect(facts).toMatch(/Backupsdaily, keep 3/);
    // The web preset's implicit rules (80 and 443) show among the effective rules without a reload.
    await page
      .getByRole('table', { name: 'Effective firewall rules' })
      .getByRole('cell', { name: '443' })
      .first()
      .waitFor();

    await page
      .getByRole('table', { name: 'Recent events' })
      .getByRole('cell', { name: 'instance.updated', exact: true })
      .waitFor();
    expect(await api('GET', `/v1/instances/${web.id}`)).toMatchObject({
      name: 'edited-1',
      tags: { env: 'prod', team: 'web' },
      firewall_preset: 'web',
      monitoring: false,
      backup_schedule: { frequency: 'daily', retention: 3 },
    });
    await checkPage(page, 'instance detail after an edit');
    await screenshot(page, 'instance-detail-edited');
    expect(chromium.cspViolations).toEqual([]);
  });
});
