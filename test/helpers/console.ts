/**
 * What the console's browser suites share: Debian's chromium (headless, through playwright-core, which
 * never downloads a browser) with one set of launch flags, the console built when dist/console is
 * missing, signing in through the form, axe-core, screenshots to test-results/console-screenshots/, the
 * 375 px dark-mode check, and the Content-Security-Policy violations the page reports.
 *
 * Under CI=true a suite fails without chromium (`describeInChromium` adds a failing case); elsewhere it
 * skips.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { type Browser, type BrowserContextOptions, chromium, type Locator, type Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/platform/http/console-routes.js';

/** The console's navigation links, by their exact accessible names (issue 23 makes them a contract). */
export const NAV_LABELS = [
  'Instances',
  'Volumes',
  'Snapshots',
  'Networking',
  'Alerts',
  'Webhooks',
  'Billing',
  'Settings',
] as const;

export const CHROMIUM = '/usr/bin/chromium';
/** The launch flags of every browser suite (and bench/console-render.mjs). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
export const SCREENSHOTS = path.resolve('test-results/console-screenshots');
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const browserMissing = !existsSync(CHROMIUM);

/**
 * `describe` for a browser suite: skipped without chromium, except under CI=true where a failing case
 * says what is missing instead.
 */
export function describeInChromium(name: string, suite: () => void): void {
  if (browserMissing && process.env.CI === 'true') {
    describe(name, () => {
      it("needs Debian chromium at /usr/bin/chromium (npm test's set-up installs it as root)", () => {
        throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
      });
    });
  }
  describe.skipIf(browserMissing)(name, suite);
}

export interface ConsoleBrowser {
  browser: Browser;
  page: Page;
  /** Content-Security-Policy violations the page logged: a suite expects none. */
  cspViolations: string[];
}

/**
 * Builds the console if dist/console is missing, makes the screenshot folder and opens chromium with one
 * page at 1280x900 (certificate errors ignored: the test server's certificate is self-signed). Playwright
 * gives each launch a fresh, temporary user data dir.
 */
export async function openConsoleBrowser(options: BrowserContextOptions = {}): Promise<ConsoleBrowser> {
  if (!existsSync(path.join(CONSOLE_DIR, 'index.html'))) {
    execFileSync('npx', ['vite', 'build', '--config', 'console/vite.config.ts', '--logLevel', 'warn']);
  }
  mkdirSync(SCREENSHOTS, { recursive: true });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
  const context = await browser.newContext({
    ignoreHTTPSErrors: true,
    viewport: { width: 1280, height: 900 },
    ...options,
  });
  const page = await context.newPage();
  const cspViolations: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) cspViolations.push(message.text());
  });
  return { browser, page, cspViolations };
}

/** Signs in through the form with a good key and waits for the Instances page. */
export async function signIn(page: Page, serverUrl: string, key: string): Promise<void> {
  await page.goto(`${serverUrl}/console/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Instances', level: 1 }).waitFor();
}

/**
 * axe-core on the page as it is; no serious or critical violation. Evaluated through the DevTools
 * protocol: page.addScriptTag would add an inline script, which the console's CSP rightly refuses.
 * Functions given to page.evaluate run in the page: they reach its globals through globalThis (the tests
 * are compiled without the DOM library).
 */
export async function checkAccessibility(page: Page, name: string): Promise<void> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const result = await (
      globalThis as unknown as { axe: { run: () => Promise<{ violations: AxeViolation[] }> } }
    ).axe.run();
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
  expect(violations, name).toEqual([]);
}

/** A full-page screenshot to test-results/console-screenshots/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** How far the page scrolls sideways (0 or less when it fits the viewport). */
export function horizontalOverflow(page: Page): Promise<number> {
  return page.evaluate(() => {
    const { document, innerWidth } = globalThis as unknown as {
      document: { documentElement: { scrollWidth: number } };
      innerWidth: number;
    };
    return document.documentElement.scrollWidth - innerWidth;
  });
}

/** Switches to 375 px wide in dark mode (`prefers-color-scheme: dark`). */
export async function narrowAndDark(page: Page): Promise<void> {
  await page.setViewportSize({ width: 375, height: 800 });
  await page.emulateMedia({ colorScheme: 'dark' });
}

/** Back to 1280 px in light mode. */
export async function wideAndLight(page: Page): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.emulateMedia({ colorScheme: 'light' });
}

/**
 * At 375 px in dark mode the page does not scroll sideways and passes axe; screenshot `<name>-375-dark`.
 * Leaves the page narrow and dark.
 */
export async function checkNarrowDark(page: Page, name: string): Promise<void> {
  await narrowAndDark(page);
  expect(await horizontalOverflow(page), `${name} at 375 px`).toBeLessThanOrEqual(0);
  await checkAccessibility(page, `${name} at 375 px, dark`);
  await screenshot(page, `${name}-375-dark`);
}

/** The number of keys in the page's sessionStorage or localStorage. */
export function storageLength(page: Page, storage: 'sessionStorage' | 'localStorage'): Promise<number> {
  return page.evaluate(
    (name) => (globalThis as unknown as Record<string, { length: number }>)[name]!.length,
    storage,
  );
}

interface AxeViolation {
  id: string;
  impact: string | null;
  nodes: { target: string[] }[];
}

/**
 * Opens a dialog from the keyboard (focus its button, Enter) and waits for focus to move into it: the
 * dialog becomes visible a moment before its effect moves focus, so focus is polled, not read once.
 */
export async function openDialogByKeyboard(page: Page, button: Locator, name: string): Promise<Locator> {
  await button.focus();
  await page.keyboard.press('Enter');
  const dialog = page.getByRole('dialog', { name });
  await dialog.waitFor();
  await expect
    .poll(() => dialog.evaluate((node) => node.contains(node.ownerDocument.activeElement)))
    .toBe(true);
  return dialog;
}

/** Escape closes the dialog without saving, and focus comes back to the button that opened it. */
export async function closeDialogWithEscape(page: Page, dialog: Locator, opener: Locator): Promise<void> {
  await page.keyboard.press('Escape');
  await expect.poll(() => dialog.count()).toBe(0);
  await expect.poll(() => opener.evaluate((node) => node === node.ownerDocument.activeElement)).toBe(true);
}
