/**
 * The console's Volumes, Snapshots and Networking pages in a real browser (Debian's chromium, headless,
 * driven by playwright-core) against the real server over HTTPS: a firewall rule created from the page
 * decides a packet checked from the page (verdict and deciding rule shown); a volume created from the page
 * becomes available without a reload, is attached to an instance and snapshotted; a VPN peer's client
 * configuration downloads as a file. axe-core on each page (no serious or critical violation), each page
 * at 375 px in dark mode without horizontal overflow, and a screenshot of each page in
 * test-results/console-screenshots/.
 *
 * Browser, sign-in, axe-core and screenshots: test/helpers/console.ts (under CI=true the suite fails
 * without chromium; elsewhere it skips).
 */
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { account } from './helpers/common.js';
import {
  type ConsoleBrowser,
  checkNarrowDark,
  checkAccessibility as checkPage,
  describeInChromium,
  openConsoleBrowser,
  screenshot,
  signIn,
  wideAndLight,
} from './helpers/console.js';
import { createInstance, waitForStatus } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

describeInChromium('console storage and networking pages in Chromium', () => {
  // At 4x a new formatted volume is `creating` for about 1.75 s: long enough to see it change.
  const server = serverForSuite({ env: { NIMBUS_SIM_SPEEDUP: '4' } });
  let chromium: ConsoleBrowser;
  let page: Page;
  let user: { id: string; key: string };
  let web: { id: string; name: string };

  beforeAll(async () => {
    user = await account(server);
    const instance = await createInstance(server, user.key, { name: 'web-1' });
    web = { id: instance.id, name: instance.name };
    await waitForStatus(server, user.key, web.id, 'running', 20_000);
    chromium = await openConsoleBrowser();
    page = chromium.page;
    await signIn(page, server.url, user.key);
  }, 60_000);

  afterAll(async () => {
    await chromium?.browser.close();
  });

  const checkAccessibility = (name: string) => checkPage(page, name);

  /** A full-page screenshot at 1280 px, then the same page at 375 px in dark mode: no sideways scroll. */
  async function screenshotBothWays(name: string): Promise<void> {
    await screenshot(page, name);
    await checkNarrowDark(page, name);
    await wideAndLight(page);
  }

  const badgeOf = (name: string) =>
    page.getByRole('row', { name: new RegExp(`^${name} `) }).locator('.badge');

  it('creates a firewall rule and checks a packet: the verdict and the deciding rule are shown', async () => {
    await page.getByRole('link', { name: 'Networking', exact: true }).click();
    await page.getByRole('heading', { name: 'Networking', level: 1 }).waitFor();
    await page.getByText('No firewall rules').waitFor();
    await page.getByText('No VPNs').waitFor();
    await checkAccessibility('networking (empty)');

    await page.getByRole('button', { name: 'Create rule' }).click();
    const form = page.getByRole('form', { name: 'Create firewall rule' });
    await form.getByLabel('Name').fill('block-scanner');
    await form.getByLabel('Action').selectOption('deny');
    await form.getByLabel('Ports').fill('22');
    await form.getByLabel(/Sources/).fill('198.51.100.7');
    await form.getByLabel('Priority').fill('100');
    await checkAccessibility('create firewall rule');
    await form.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('cell', { name: 'block-scanner', exact: true }).waitFor();
    const ruleRow = page.getByRole('row', { name: /^block-scanner / });
    expect(await ruleRow.textContent()).toContain('every instance');
    const rules = await server.request('GET', '/v1/firewall/rules', { key: user.key });
    expect(rules.body.data).toMatchObject([
      { name: 'block-scanner', action: 'deny', protocol: 'tcp', ports: '22', sources: ['198.51.100.7/32'] },
    ]);

    const check = page.getByRole('form', { name: 'Check a packet' });
    await check.getByLabel('Instance').selectOption({ label: web.name });
    await check.getByLabel('Protocol').selectOption('tcp');
    await check.getByLabel('Port').fill('22');
    await check.getByLabel('Address').fill('198.51.100.7');
    await check.getByRole('button', { name: 'Check' }).click();
    const verdict = page.getByRole('status', { name: 'Verdict' });
    await expect
      .poll(() => verdict.textContent())
      .toMatch(/Verdict: deny.*Deciding rule: block-scanner \(rule, priority 100/);

    // Another address falls through to the instance's preset (ssh-only), which lets SSH in.
    await check.getByLabel('Address').fill('203.0.113.9');
    await check.getByRole('button', { name: 'Check' }).click();
    await expect.poll(() => verdict.textContent()).toMatch(/Verdict: allow.*Deciding rule: .*\(preset/);

    // An API refusal shows the API's message and the request id.
    await check.getByLabel('Address').fill('not-an-address');
    await check.getByRole('button', { name: 'Check' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/address.*Request id: req_/is);
    await check.getByLabel('Address').fill('198.51.100.7');
    await check.getByRole('button', { name: 'Check' }).click();
    await verdict.waitFor();
    await checkAccessibility('networking');
  });

  it('creates a VPN, adds a peer and downloads its client configuration as a file', async () => {
    await page.getByRole('button', { name: 'Create VPN' }).click();
    const form = page.getByRole('form', { name: 'Create VPN' });
    await form.getByLabel('Name').fill('office');
    await form.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => badgeOf('office').textContent(), { timeout: 15_000 }).toBe('active');
    await page.getByRole('button', { name: 'Peers of office' }).click();
    await page.getByText('No peers').waitFor();
    await page.getByLabel('Peer name').fill('laptop');
    await page.getByRole('button', { name: 'Add peer' }).click();
    await page.getByText(/it holds a private key that will not be shown again/).waitFor();
    const fresh = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download laptop.conf' }).click();
    const freshFile = await fresh;
    expect(freshFile.suggestedFilename()).toBe('laptop.conf');
    const withKey = readFileSync(await freshFile.path(), 'utf8');
    expect(withKey).toMatch(/\[Interface\]\nPrivateKey = [A-Za-z0-9+/]{43}=/);

    const later = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download config of laptop' }).click();
    const laterFile = readFileSync(await (await later).path(), 'utf8');
    expect(laterFile).toContain('[Peer]');
    expect(laterFile).toContain('<your private key: wg genkey>');
    // Each peer's last handshake and bytes, as the (simulated) gateway counts them.
    await page.getByRole('columnheader', { name: 'Last handshake' }).waitFor();
    const peerRow = page.getByRole('row', { name: /^laptop / });
    expect(await peerRow.textContent()).toMatch(/\d+(\.\d)? [KMG]?B \/ \d+(\.\d)? [KMG]?B/);
    await checkAccessibility('networking with a VPN and its peers');
    await screenshotBothWays('networking');
  });

  it('creates a volume that becomes available without a reload, attaches it and snapshots it', async () => {
    await page.getByRole('link', { name: 'Volumes', exact: true }).click();
    await page.getByRole('heading', { name: 'Volumes', level: 1 }).waitFor();
    // The instance's root volume is listed; its row has no actions of its own.
    await page.getByText('Follows its instance').waitFor();
    await page.getByRole('button', { name: 'Create volume' }).first().click();
    const form = page.getByRole('form', { name: 'Create volume' });
    await form.getByLabel('Name').fill('data-1');
    await form.getByLabel('Size (GB)').fill('20');
    await checkAccessibility('create volume');
    await page.evaluate(() => Object.assign(globalThis as unknown as object, { sameDocument: true }));
    await form.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => badgeOf('data-1').textContent(), { timeout: 10_000 }).toBe('creating');
    await expect.poll(() => badgeOf('data-1').textContent(), { timeout: 15_000 }).toBe('available');

    await page.getByRole('button', { name: 'Attach data-1' }).click();
    await page.getByLabel('Instance in us-east-1').selectOption({ label: `${web.name} (running)` });
    await page.getByRole('form', { name: 'Attach data-1' }).getByRole('button', { name: 'Attach' }).click();
    await expect.poll(() => badgeOf('data-1').textContent(), { timeout: 15_000 }).toBe('in-use');
    const row = page.getByRole('row', { name: /^data-1 / });
    expect(await row.textContent()).toContain('/dev/vdb');
    expect(await row.getByRole('link', { name: web.name }).count()).toBe(1);

    // Resize offers only growth, and an attached volume grows online; an attached volume offers no delete.
    expect(await page.getByRole('button', { name: 'Delete data-1' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Resize data-1' }).click();
    expect(await page.getByLabel('New size (GB)').getAttribute('min')).toBe('21');
    await page.getByLabel('New size (GB)').fill('30');
    await page.getByRole('form', { name: 'Resize data-1' }).getByRole('button', { name: 'Resize' }).click();
    await expect.poll(() => row.getByRole('cell', { name: '30 GB' }).count(), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => badgeOf('data-1').textContent(), { timeout: 15_000 }).toBe('in-use');

    await page.getByRole('button', { name: 'Snapshot data-1' }).click();
    await page.getByLabel('Snapshot name').fill('data-1-before');
    await page.getByRole('button', { name: 'Take snapshot' }).click();
    await page.getByText('Snapshot data-1-before is being taken').waitFor();
    expect(
      await page.evaluate(() => (globalThis as unknown as { sameDocument?: boolean }).sameDocument),
    ).toBe(true);
    await checkAccessibility('volumes');
    await screenshotBothWays('volumes');

    // Detach asks first; Escape keeps the volume attached.
    await page.getByRole('button', { name: 'Detach data-1' }).click();
    await page.getByRole('dialog').waitFor();
    await page.keyboard.press('Escape');
    expect(await badgeOf('data-1').textContent()).toBe('in-use');
  });

  it('lists the snapshot, restores it as a new volume and sets a backup schedule', async () => {
    await page.getByRole('link', { name: 'Snapshots', exact: true }).click();
    await page.getByRole('heading', { name: 'Snapshots', level: 1 }).waitFor();
    await expect.poll(() => badgeOf('data-1-before').textContent(), { timeout: 15_000 }).toBe('available');
    await page.getByRole('button', { name: 'Restore data-1-before' }).click();
    const restore = page.getByRole('form', { name: 'Restore data-1-before' });
    await restore.getByLabel('Volume name').fill('data-1-copy');
    await restore.getByRole('button', { name: 'Restore' }).click();
    await page.getByText(/Restoring data-1-before into the volume data-1-copy/).waitFor();
    const copies = await server.request('GET', '/v1/volumes?name=data-1-copy', { key: user.key });
    expect(copies.body.data).toMatchObject([{ size_gb: 30, region: 'us-east-1' }]);

    await page.getByLabel('Frequency for data-1', { exact: true }).selectOption('daily');
    await page.getByLabel('Snapshots to keep for data-1', { exact: true }).fill('5');
    await page
      .getByRole('form', { name: 'Backup schedule of data-1', exact: true })
      .getByRole('button', { name: 'Save' })
      .click();
    await page.getByRole('cell', { name: 'daily, keep 5' }).waitFor();
    // A snapshot being restored cannot be deleted: wait for the copy first.
    await expect
      .poll(
        async () =>
          (await server.request('GET', '/v1/volumes?name=data-1-copy', { key: user.key })).body.data[0]
            .status,
        { timeout: 15_000 },
      )
      .toBe('available');
    await checkAccessibility('snapshots');
    await screenshotBothWays('snapshots');

    await page.getByRole('button', { name: 'Delete data-1-before' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete', exact: true }).click();
    await expect
      .poll(async () => (await server.request('GET', '/v1/snapshots', { key: user.key })).body.data.length, {
        timeout: 15_000,
      })
      .toBe(0);
    expect(chromium.cspViolations).toEqual([]);
  });
});
