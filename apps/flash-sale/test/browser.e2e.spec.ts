import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  chromium,
  type Browser,
  type BrowserContext,
  type Locator,
  type Page,
} from 'playwright-core';
import { LockService } from '@app/distributed-lock';
import { getFreePort } from '../../../test/support/ports.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';
import { SaleFeed, type SaleUpdate } from '../src/web/sale-feed.service.js';
import type { AppConfigOverrides } from '../src/config/app-config.js';
import {
  createCoupon,
  createTestDatabase,
  findTestPostgres,
  sleep,
  startApp,
  type TestApp,
  type TestDatabase,
} from './support/harness.js';

/**
 * The web page at `/` in a real headless Chromium (Debian's `chromium`
 * package, driven by playwright-core), and the server-sent events it reads.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
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

/** What Chrome logs for the 409 answers the test provokes. */
const EXPECTED_HTTP_ERROR =
  /^Failed to load resource: the server responded with a status of 409\b/;

const postgres = await findTestPostgres();
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  console.warn(
    `flash-sale browser tests: no Chromium at ${CHROMIUM}, so they are skipped. ` +
      'Install it with `apt-get install -y chromium` (or set CHROMIUM_PATH).',
  );
}

/** Polls `read` until it returns true, failing with `what` after `timeoutMs`. */
async function until(
  what: string,
  read: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await read()) return;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(25);
  }
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

/** An open `GET /api/events`: the parsed events so far, and a way to hang up. */
interface EventStream {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly updates: SaleUpdate[];
  readonly raw: () => string;
  readonly ended: Promise<void>;
  close(): void;
}

function openEvents(baseUrl: string): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${baseUrl}/api/events`, (response) => {
      let text = '';
      const updates: SaleUpdate[] = [];
      const ended = new Promise<void>((done) => {
        response.on('end', done);
        response.on('close', done);
      });
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        text += chunk;
        const blocks = text.split('\n\n');
        text = blocks.pop() ?? '';
        for (const block of blocks) {
          const data = block
            .split('\n')
            .filter((line) => line.startsWith('data: '))
            .map((line) => line.slice('data: '.length))
            .join('\n');
          if (data) updates.push(JSON.parse(data) as SaleUpdate);
        }
      });
      response.on('error', () => undefined);
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        updates,
        raw: () => text,
        ended,
        close: () => request.destroy(),
      });
    });
    request.on('error', reject);
  });
}

describe.skipIf(!hasChromium)('the web page', () => {
  let redisServer: RedisServerHandle;
  let db: TestDatabase | undefined;
  let database: AppConfigOverrides;
  let embeddedDir: string | undefined;
  let app: TestApp;
  let baseUrl: string;
  let browser: Browser;
  let screenshots: string;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    redisServer = await startRedisServer();
    if (postgres) {
      db = await createTestDatabase(postgres);
      database = { databaseUrl: db.url };
    } else {
      // No PostgreSQL here: the app's own embedded database, on a private
      // port and directory.
      embeddedDir = await mkdtemp(path.join(os.tmpdir(), 'flash-sale-db-'));
      database = {
        embeddedDb: { port: await getFreePort(), dataDir: embeddedDir },
      };
    }
    app = await startApp({ redisUrl: redisServer.url, ...database });
    await app.app.listen(0, '127.0.0.1');
    const { port } = app.app.getHttpServer().address() as AddressInfo;
    baseUrl = `http://127.0.0.1:${port}`;
    // launch() gives Chromium a fresh temporary profile and removes it on close.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: CHROMIUM_ARGS,
      timeout: 30_000,
    });
    screenshots = await mkdtemp(path.join(os.tmpdir(), 'flash-sale-page-'));
  });

  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await db?.drop();
    await redisServer?.stop();
    if (embeddedDir) await rm(embeddedDir, { recursive: true, force: true });
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
    const page = await app.http.get('/').expect(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain(
      "default-src 'none'",
    );
    expect(page.text).toContain('<title>Flash sale</title>');
    // Nothing is loaded from another origin.
    expect(page.text).not.toMatch(/(src|href)="(https?:)?\/\//);

    const script = await app.http.get('/assets/app.js').expect(200);
    expect(script.headers['content-type']).toBe(
      'text/javascript; charset=utf-8',
    );
    const style = await app.http.get('/assets/app.css').expect(200);
    expect(style.headers['content-type']).toBe('text/css; charset=utf-8');
    const missing = await app.http.get('/assets/secret.txt').expect(404);
    expect(missing.body).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    await app.http.get('/assets/..%2Fpage.controller.ts').expect(404);

    const health = await app.http.get('/health').expect(200);
    expect(health.body).toMatchObject({
      ok: true,
      redis: 'up',
      database: 'up',
    });
    const coupons = await app.http.get('/api/coupons').expect(200);
    expect(Array.isArray(coupons.body)).toBe(true);
  });

  it('buys in Chromium: the stock drops live, a second purchase is refused', async () => {
    const couponId = await createCoupon(app.http, {
      name: 'Weekend 20% off',
      price: 4.5,
      stock: 3,
    });
    const { page, errors } = await openPage();
    const loaded = await page.goto(baseUrl);
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
    await until('the order in the recent orders', async () =>
      ((await page.locator('#orders tbody').textContent()) ?? '').includes(
        'alice',
      ),
    );

    await card.getByRole('button', { name: 'Buy' }).click();
    await until('the second answer', async () =>
      ((await result.textContent()) ?? '').includes('ALREADY_PURCHASED'),
    );
    expect(await result.getAttribute('data-kind')).toBe('error');
    expect(await result.textContent()).toContain('Already purchased');
    await expectText(card.locator('.remaining'), '2');

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
    await page.goto(baseUrl);
    await page.getByLabel('Name').fill('Phone coupon');
    await page.getByLabel('Price').fill('1.25');
    await page.getByLabel('Stock').fill('5');
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

  it('streams snapshots over SSE from one shared poll that stops when the last client leaves', async () => {
    const feed = app.app.get(SaleFeed);
    const couponId = await createCoupon(app.http, { stock: 7 });
    await until('no client left from earlier tests', () => {
      return feed.clientCount === 0 && feed.pollerCount === 0;
    });
    const reads = vi.spyOn(feed, 'snapshot');
    try {
      const first = await openEvents(baseUrl);
      const second = await openEvents(baseUrl);
      expect(first.status).toBe(200);
      expect(first.headers['content-type']).toMatch(/^text\/event-stream/);
      await until('a snapshot on both streams', () => {
        return first.updates.length > 0 && second.updates.length > 0;
      });
      expect(feed.clientCount).toBe(2);
      expect(feed.pollerCount).toBe(1);
      const update = first.updates[0];
      expect(update.ok).toBe(true);
      if (!update.ok) return;
      expect(update.coupons.find((c) => c.id === couponId)).toEqual({
        id: couponId,
        name: 'Flash coupon',
        price: 9.99,
        stock: 7,
        remaining: 7,
        sold: 0,
        saleState: 'on_sale',
        startAt: expect.any(String),
        endAt: expect.any(String),
      });

      first.close();
      await first.ended;
      await until('the first client to be gone', () => feed.clientCount === 1);
      expect(feed.pollerCount).toBe(1);
      second.close();
      await second.ended;
      await until('the poll to stop', () => {
        return feed.clientCount === 0 && feed.pollerCount === 0;
      });
      // No timer is left behind: nothing reads the sale any more.
      const readsAtStop = reads.mock.calls.length;
      await sleep(1_600);
      expect(reads.mock.calls.length).toBe(readsAtStop);
    } finally {
      reads.mockRestore();
    }
  });

  it('never takes a lock while streaming', async () => {
    const locks = app.app.get(LockService);
    const spies = [
      vi.spyOn(locks, 'acquire'),
      vi.spyOn(locks, 'tryAcquire'),
      vi.spyOn(locks, 'isLocked'),
    ];
    try {
      const stream = await openEvents(baseUrl);
      await until('a snapshot', () => stream.updates.length > 0);
      await sleep(1_200);
      stream.close();
      await stream.ended;
      for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });

  it('ends open streams when the app shuts down, so that it stops promptly', async () => {
    // Another instance on the same Redis and database.
    const other = await startApp({ redisUrl: redisServer.url, ...database });
    let closed = false;
    try {
      await other.app.listen(0, '127.0.0.1');
      const { port } = other.app.getHttpServer().address() as AddressInfo;
      const stream = await openEvents(`http://127.0.0.1:${port}`);
      await until('a snapshot', () => stream.updates.length > 0);
      const started = Date.now();
      await other.close();
      closed = true;
      // Well below the 5 s keep-alive timeout an idle SSE connection would add.
      expect(Date.now() - started).toBeLessThan(3_000);
      await stream.ended;
      expect(other.app.get(SaleFeed).pollerCount).toBe(0);
    } finally {
      if (!closed) await other.close();
    }
  });
});
