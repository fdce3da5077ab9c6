import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  type Browser,
  type BrowserContext,
  type Locator,
  type Page,
} from 'playwright-core';
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import { buyerTag } from '../src/web/buyer-tag.js';
import {
  createCoupon,
  findTestPostgres,
  TEST_ADMIN_TOKEN,
} from './support/harness.js';
import {
  CHROMIUM,
  hasChromium,
  launchChromium,
  until,
} from './support/chromium.js';
import { usePageApp } from './support/page-app.js';

/**
 * The web page at `/` in a real headless Chromium (Debian's `chromium`
 * package, driven by playwright-core). The events it reads are tested in
 * sale-events.e2e.spec.ts.
 */

/** What Chrome logs for the 409 answers the test provokes. */
const EXPECTED_HTTP_ERROR =
  /^Failed to load resource: the server responded with a status of 409\b/;

const postgres = await findTestPostgres();
if (!hasChromium) {
  console.warn(
    `flash-sale browser tests: no Chromium at ${CHROMIUM}, so they are skipped. ` +
      'Install it with `apt-get install -y chromium` (or set CHROMIUM_PATH).',
  );
}

/** Waits until the element's text, trimmed, is `expected`. */
async function expectText(
  locator: Locator,
  expected: string,
  timeoutMs = 5_000,
): Promise<void> {
  let last: string | null = null;
  try {
    await until(
      `text ${JSON.stringify(expected)}`,
      async () => {
        last = (await locator.textContent({ timeout: 1_000 }))?.trim() ?? null;
        return last === expected;
      },
      timeoutMs,
    );
  } catch {
    throw new Error(
      `Expected ${JSON.stringify(expected)}, the page shows ${JSON.stringify(last)}`,
    );
  }
}

/** Asserts the file is a PNG of a plausible size and returns its width and height. */
async function checkPng(
  file: string,
): Promise<{ width: number; height: number }> {
  const png = await readFile(file);
  expect(png.length).toBeGreaterThan(10_000);
  expect(png.subarray(0, 8)).toEqual(
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  );
  expect(png.subarray(12, 16).toString('ascii')).toBe('IHDR');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

describe.skipIf(!hasChromium)('the web page', () => {
  const shop = usePageApp(postgres);
  let browser: Browser;
  let screenshots: string;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    // launch() gives Chromium a fresh temporary profile and removes it on close.
    browser = await launchChromium();
    screenshots = await mkdtemp(path.join(os.tmpdir(), 'flash-sale-page-'));
  });

  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  afterAll(async () => {
    await browser?.close();
    if (screenshots && !process.env.FLASH_SALE_KEEP_SCREENSHOTS) {
      await rm(screenshots, { recursive: true, force: true });
    } else if (screenshots) {
      console.log(`screenshots kept in ${screenshots}`);
    }
  });

  /** A new page that records console errors and uncaught exceptions. */
  async function openPage(
    viewport = { width: 1280, height: 900 },
  ): Promise<{ page: Page; errors: string[] }> {
    const context = await browser.newContext({ viewport });
    contexts.push(context);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (message) => {
      // Chrome logs every 4xx answer; the page shows those itself.
      const text = message.text();
      if (message.type() === 'error' && !EXPECTED_HTTP_ERROR.test(text)) {
        errors.push(text);
      }
    });
    page.on('pageerror', (error) => errors.push(error.message));
    return { page, errors };
  }

  it('serves the page at / and its assets without shadowing /api and /health', async () => {
    const page = await shop.app.http.get('/').expect(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain(
      "default-src 'none'",
    );
    expect(page.text).toContain('<title>Flash sale</title>');
    // Nothing is loaded from another origin.
    expect(page.text).not.toMatch(/(src|href)="(https?:)?\/\//);

    const script = await shop.app.http.get('/assets/app.js').expect(200);
    expect(script.headers['content-type']).toBe(
      'text/javascript; charset=utf-8',
    );
    for (const sheet of ['app.css', 'shop.css', 'dashboard.css']) {
      const style = await shop.app.http.get(`/assets/${sheet}`).expect(200);
      expect(style.headers['content-type']).toBe('text/css; charset=utf-8');
    }
    const missing = await shop.app.http.get('/assets/secret.txt').expect(404);
    expect(missing.body).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    await shop.app.http.get('/assets/..%2Fpage.controller.ts').expect(404);

    const health = await shop.app.http.get('/health').expect(200);
    expect(health.body).toMatchObject({
      ok: true,
      redis: 'up',
      database: 'up',
    });
    const coupons = await shop.app.http.get('/api/coupons').expect(200);
    expect(Array.isArray(coupons.body)).toBe(true);
  });

  it('buys in Chromium: the stock drops live, a second purchase is refused', async () => {
    const couponId = await createCoupon(shop.app.http, {
      name: 'Weekend 20% off',
      price: 4.5,
      stock: 3,
    });
    const { page, errors } = await openPage();
    const loaded = await page.goto(shop.baseUrl);
    expect(loaded?.status()).toBe(200);

    const card = page.locator(`li.coupon[data-coupon-id="${couponId}"]`);
    await card.waitFor({ timeout: 10_000 });
    await expectText(card.getByRole('heading'), 'Weekend 20% off');
    await expectText(card.locator('.remaining'), '3');
    await expectText(card.locator('.sold'), '0');
    await expectText(card.locator('.badge'), 'On sale');

    await card.getByLabel('User id').fill('alice');
    await card.getByRole('button', { name: 'Buy' }).click();

    const result = card.getByRole('status');
    await until('the purchase answer', async () =>
      ((await result.textContent()) ?? '').includes('Bought'),
    );
    expect(await result.getAttribute('data-kind')).toBe('ok');
    expect(await result.textContent()).toMatch(/order #\d+ for alice/);
    // The figures come from the next server-sent event, not from the answer.
    await expectText(card.locator('.remaining'), '2');
    await expectText(card.locator('.sold'), '1');
    // The buyer shows as a short hash, never as the id.
    await until('the order in the recent orders', async () =>
      ((await page.locator('#orders tbody').textContent()) ?? '').includes(
        buyerTag('alice'),
      ),
    );
    expect(await page.locator('#orders tbody').textContent()).not.toContain(
      'alice',
    );

    await card.getByRole('button', { name: 'Buy' }).click();
    await until('the second answer', async () =>
      ((await result.textContent()) ?? '').includes('ALREADY_PURCHASED'),
    );
    expect(await result.getAttribute('data-kind')).toBe('error');
    expect(await result.textContent()).toContain('Already purchased');
    await expectText(card.locator('.remaining'), '2');
    // The lock panel shows this instance's /metrics figures: both purchases
    // took the coupon's lock, and nothing is held now.
    const metrics = parsePrometheusText(
      await (await fetch(new URL('/metrics', shop.baseUrl))).text(),
    );
    const acquired = metrics.sum('distributed_lock_acquisitions_total', {
      outcome: 'acquired',
    });
    expect(acquired).toBeGreaterThanOrEqual(2);
    await expectText(
      page.locator('#lock-stats [data-stat="acquired"]'),
      String(acquired),
    );
    await expectText(page.locator('#lock-stats [data-stat="now"]'), '0 / 0');

    const file = path.join(screenshots, 'desktop.png');
    await page.screenshot({ path: file, fullPage: true });
    const size = await checkPng(file);
    expect(size.width).toBe(1280);
    expect(await page.locator('#connection-text').textContent()).toContain(
      'Live',
    );
    expect(errors).toEqual([]);
  });

  it('creates a coupon from the form and shows it; reads well on a phone', async () => {
    const { page, errors } = await openPage({ width: 390, height: 844 });
    await page.goto(shop.baseUrl);
    await page.getByLabel('Name').fill('Phone coupon');
    await page.getByLabel('Price').fill('1.25');
    await page.getByLabel('Stock').fill('5');
    await page.getByLabel('Admin token').fill(TEST_ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Create coupon' }).click();
    const created = page.locator('#create-form .result');
    await until('the created coupon', async () =>
      ((await created.textContent()) ?? '').includes('Created'),
    );
    const id = Number(/#(\d+)/.exec((await created.textContent()) ?? '')?.[1]);
    expect(id).toBeGreaterThan(0);
    const card = page.locator(`li.coupon[data-coupon-id="${id}"]`);
    await card.waitFor({ timeout: 5_000 });
    await expectText(card.locator('.remaining'), '5');

    // An invalid user id is caught before anything is sent.
    await card.getByLabel('User id').fill('not valid!');
    await card.getByRole('button', { name: 'Buy' }).click();
    await until('the validation message', async () =>
      ((await card.getByRole('status').textContent()) ?? '').includes(
        'Check the user id',
      ),
    );

    // Nothing wider than the screen.
    expect(
      await page.evaluate(
        'document.documentElement.scrollWidth <= window.innerWidth',
      ),
    ).toBe(true);
    const file = path.join(screenshots, 'phone.png');
    await page.screenshot({ path: file, fullPage: true });
    expect((await checkPng(file)).width).toBe(390);
    expect(errors).toEqual([]);
  });
});
