/**
 * The console's Public IPs page in a real browser (Debian's chromium, headless, driven by playwright-core)
 * against the real server over HTTPS: allocate an address from the page, assign it to an instance chosen
 * from the list (only the region's instances without one are offered), see the instance's address follow,
 * unassign and release after a confirmation. axe-core on the page, and the page at 375 px in dark mode
 * without horizontal overflow.
 *
 * Browser, sign-in, axe-core and screenshots: test/helpers/console.ts (under CI=true the suite fails
 * without chromium; elsewhere it skips).
 */
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
import { createInstance } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

describeInChromium('console Public IPs page in Chromium', () => {
  const server = serverForSuite({ env: { NIMBUS_SIM_SPEEDUP: '1000' } });
  let chromium: ConsoleBrowser;
  let page: Page;
  let user: { id: string; key: string };
  let bare: { id: string; name: string };

  beforeAll(async () => {
    user = await account(server);
    const made = await createInstance(server, user.key, { name: 'bare-1', public_ip: false });
    bare = { id: made.id, name: made.name };
    // Has an address already: never offered.
    await createInstance(server, user.key, { name: 'web-1' });
    chromium = await openConsoleBrowser();
    page = chromium.page;
    await signIn(page, server.url, user.key);
  }, 60_000);

  afterAll(async () => {
    await chromium?.browser.close();
  });

  it('allocates, assigns to an instance from the list, unassigns and releases', async () => {
    await page.getByRole('link', { name: 'Public IPs', exact: true }).click();
    await page.getByRole('heading', { name: 'Public IPs', level: 1 }).waitFor();
    // web-1's own address is listed, released with it.
    await page.getByRole('cell', { name: 'web-1-ip', exact: true }).waitFor();

    await page.getByRole('button', { name: 'Allocate public IP' }).first().click();
    const form = page.getByRole('form', { name: 'Allocate public IP' });
    await form.getByLabel('Name (optional)').fill('front');
    await form.getByLabel('Region').selectOption('us-east-1');
    await checkPage(page, 'allocate public IP');
    await form.getByRole('button', { name: 'Allocate' }).click();
    await page.getByRole('cell', { name: 'front', exact: true }).waitFor();
    const [front] = (await server.request('GET', '/v1/public-ips?name=front', { key: user.key })).body.data;
    expect(front).toMatchObject({ instance_id: null, region: 'us-east-1' });

    await page.getByRole('button', { name: 'Assign front' }).click();
    const assign = page.getByRole('form', { name: `Assign ${front.address}` });
    const choices = await assign.getByRole('option').allTextContents();
    expect(choices).toEqual([expect.stringMatching(/^bare-1 \(/)]);
    await assign.getByRole('button', { name: 'Assign' }).click();
    await page
      .getByRole('row', { name: /^front / })
      .getByRole('link', { name: bare.name })
      .waitFor();
    await expect
      .poll(
        async () =>
          (await server.request('GET', `/v1/instances/${bare.id}`, { key: user.key })).body.data.public_ip,
      )
      .toBe(front.address);
    // Assigned: no release offered.
    expect(await page.getByRole('button', { name: 'Release front' }).count()).toBe(0);
    await checkPage(page, 'public IPs');
    await screenshot(page, 'public-ips');
    await checkNarrowDark(page, 'public IPs');
    await wideAndLight(page);

    await page.getByRole('button', { name: 'Unassign front' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Unassign', exact: true }).click();
    await page.getByRole('button', { name: 'Release front' }).waitFor();
    expect(
      (await server.request('GET', `/v1/instances/${bare.id}`, { key: user.key })).body.data.public_ip,
    ).toBeNull();

    await page.getByRole('button', { name: 'Release front' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Release', exact: true }).click();
    await page.getByText(`Released ${front.address}.`).waitFor();
    expect(await page.getByRole('cell', { name: 'front', exact: true }).count()).toBe(0);
    expect(chromium.cspViolations).toEqual([]);
  });
});
