import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { Browser, Page } from 'playwright-core';
import { buyerTag } from '../src/web/buyer-tag.js';
import { DEMO_MODE_ENV } from '../src/web/demo-mode.js';
import { INSTANCES_KEY } from '../src/web/instance-figures.js';
import {
  buy,
  createCoupon,
  findTestPostgres,
  startApp,
  TEST_ADMIN_TOKEN,
  useSaleBackends,
  type TestApp,
} from './support/harness.js';
import { hasChromium, launchChromium, until } from './support/chromium.js';

/**
 * The live dashboard of the page in headless Chromium: two app instances on
 * one Redis and database, the page of one showing both, the charts (uPlot),
 * the invariants turning red, and the demo's kill button.
 */

const postgres = await findTestPostgres();

/** An entry in the instances hash as another process would publish it. */
function fakeInstance(id: string, pid: number, at: number) {
  const outcomes = {
    created: 0,
    sold_out: 0,
    already_purchased: 0,
    busy: 0,
    error: 0,
  };
  return JSON.stringify({
    id,
    host: hostname(),
    pid,
    port: 1,
    at,
    outcomes,
    buckets: Array.from({ length: 14 }, () => 0),
    inFlight: {},
    lockTime: {},
  });
}

describe.skipIf(!hasChromium || !postgres)('the live dashboard', () => {
  const sale = useSaleBackends(postgres!);
  let first: TestApp;
  let second: TestApp;
  let redis: Redis;
  let baseUrl: string;
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    const config = {
      redisUrl: sale.redisServer.url,
      databaseUrl: sale.db.url,
      // No periodic repair: a broken invariant stays broken.
      stockRepairInterval: 0,
    };
    [first, second] = await Promise.all([startApp(config), startApp(config)]);
    await first.app.listen(0, '127.0.0.1');
    const { port } = first.app.getHttpServer().address() as AddressInfo;
    baseUrl = `http://127.0.0.1:${port}`;
    redis = new Redis(sale.redisServer.url);
    browser = await launchChromium();
    page = await (
      await browser.newContext({ viewport: { width: 1280, height: 900 } })
    ).newPage();
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => {
      if (
        message.type() === 'error' &&
        !/status of 409\b/.test(message.text())
      ) {
        errors.push(message.text());
      }
    });
  });

  afterAll(async () => {
    await browser?.close();
    redis?.disconnect();
    await Promise.all([first?.close(), second?.close()]);
  });

  it('shows both instances, draws the charts from a crowd, and the invariants hold', async () => {
    const couponId = await createCoupon(first.http, { stock: 5 });
    await page.goto(`${baseUrl}/`);
    await until(
      'both instances listed as up',
      async () =>
        (await page.locator('li.instance[data-alive="true"]').count()) === 2,
      8_000,
    );
    // A crowd on both instances: 5 sales, then sold out and repeats. Which
    // 5 buy depends on which request reaches the lock first.
    const bought: string[] = [];
    for (let round = 0; round < 3; round += 1) {
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, async (_, i) => {
          const user = `crowd-${i}`;
          const response = await buy(
            i % 2 ? first.http : second.http,
            couponId,
            user,
          );
          return { user, status: response.status };
        }),
      );
      for (const { user, status } of outcomes)
        if (status === 201) bought.push(user);
      await new Promise((resolve) => setTimeout(resolve, 600));
    }
    expect(bought).toHaveLength(5);
    await until(
      'all six charts drawn',
      async () => (await page.locator('.chart .uplot').count()) === 6,
      8_000,
    );
    const legend = (await page.locator('#chart-outcomes').textContent()) ?? '';
    expect(legend).toContain('201 bought');
    expect(legend).toContain('Sold out');
    expect(await page.locator('#invariants').getAttribute('data-state')).toBe(
      'ok',
    );
    const orders = (await page.locator('#orders tbody').textContent()) ?? '';
    for (const user of bought) expect(orders).toContain(buyerTag(user));
    expect(orders).not.toContain('crowd-');
    const screenshot = process.env.FLASH_SALE_DASHBOARD_SCREENSHOT;
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
    expect(errors).toEqual([]);
  });

  it('turns red when an invariant breaks (a stray order row)', async () => {
    const couponId = await createCoupon(first.http, { stock: 3 });
    await buy(first.http, couponId, 'honest').expect(201);
    await sale.db.query(
      'insert into orders (coupon_id, user_id, amount_paid) values ($1, $2, 1)',
      [couponId, 'stray'],
    );
    await until(
      'the red state',
      async () =>
        (await page.locator('#invariants').getAttribute('data-state')) ===
        'broken',
      8_000,
    );
    expect(await page.locator('#invariants').textContent()).toContain(
      `#${couponId}`,
    );
  });

  it('shows an instance that stopped publishing as gone', async () => {
    await redis.hset(
      INSTANCES_KEY,
      'silent',
      fakeInstance('silent', 999_999, Date.now() - 5_000),
    );
    try {
      await until(
        'the silent instance shown gone',
        async () =>
          (await page
            .locator('li.instance[data-instance-id="silent"]')
            .getAttribute('data-alive')
            .catch(() => null)) === 'false',
        5_000,
      );
    } finally {
      await redis.hdel(INSTANCES_KEY, 'silent');
    }
  });

  it('kills another instance from the page in demo mode', async () => {
    const victim = spawn('sleep', ['60'], { stdio: 'ignore' });
    const exited = new Promise<string | null>((resolve) =>
      victim.once('exit', (_code, signal) => resolve(signal)),
    );
    process.env[DEMO_MODE_ENV] = '1';
    await redis.hset(
      INSTANCES_KEY,
      'victim',
      fakeInstance('victim', victim.pid!, Date.now() + 60_000),
    );
    try {
      await page.getByLabel('Admin token').fill(TEST_ADMIN_TOKEN);
      const button = page.locator(
        'li.instance[data-instance-id="victim"] button.kill',
      );
      await button.waitFor({ timeout: 5_000 });
      // The button is rebuilt with every snapshot: click the current one.
      await button.click();
      expect(await exited).toBe('SIGKILL');
      await until('the kill reported', async () =>
        ((await page.locator('#kill-result').textContent()) ?? '').includes(
          'Killed',
        ),
      );
    } finally {
      delete process.env[DEMO_MODE_ENV];
      await redis.hdel(INSTANCES_KEY, 'victim');
      victim.kill('SIGKILL');
    }
  });
});
