import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import { PURCHASE_OUTCOMES } from '../src/metrics/purchase-metrics.js';
import { DEMO_MODE_ENV } from '../src/web/demo-mode.js';
import { SaleFeed } from '../src/web/sale-feed.service.js';
import { SaleSnapshots } from '../src/web/sale-snapshot.service.js';
import {
  adminAuth,
  buy,
  couponBody,
  createCoupon,
  findTestPostgres,
  useSaleApp,
} from './support/harness.js';

/**
 * The dashboard's server side on a real Redis and database: the admin token
 * of coupon creation, the purchase metrics (page and /metrics agree), the
 * instances and the demo's kill route.
 */

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('the dashboard API', () => {
  const shop = useSaleApp(postgres!);

  describe('POST /api/coupons needs the admin token', () => {
    it('answers 401 without it, 403 with a wrong one, and creates nothing', async () => {
      const missing = await shop.app.http
        .post('/api/coupons')
        .send(couponBody())
        .expect(401);
      expect(missing.headers['www-authenticate']).toBe('Bearer');
      expect(missing.body).toMatchObject({ ok: false, code: 'UNAUTHORIZED' });
      const wrong = await shop.app.http
        .post('/api/coupons')
        .set('Authorization', 'Bearer not-the-admin-token')
        .send(couponBody())
        .expect(403);
      expect(wrong.body).toMatchObject({ ok: false, code: 'FORBIDDEN' });
      // Not even validated without the token.
      await shop.app.http.post('/api/coupons').send({ stock: -1 }).expect(401);
      const list = await shop.app.http.get('/api/coupons').expect(200);
      expect(list.body).toEqual([]);
    });

    it('keeps validation errors as 400 with the token, and creates with it', async () => {
      const invalid = await shop.app.http
        .post('/api/coupons')
        .set(...adminAuth())
        .send({ ...couponBody(), stock: -1 })
        .expect(400);
      expect(invalid.body).toMatchObject({ ok: false, code: 'BAD_REQUEST' });
      await shop.app.http
        .post('/api/coupons')
        .set(...adminAuth())
        .send(couponBody())
        .expect(201);
    });
  });

  it('serves every stylesheet and script the page links, with its type', async () => {
    const page = await shop.app.http.get('/').expect(200);
    const linked = [...page.text.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)];
    expect(linked.length).toBeGreaterThanOrEqual(6);
    for (const [, path] of linked) {
      const asset = await shop.app.http.get(path).expect(200);
      expect(asset.headers['content-type']).toBe(
        path.endsWith('.css')
          ? 'text/css; charset=utf-8'
          : 'text/javascript; charset=utf-8',
      );
    }
  });

  it('counts purchases by outcome: the feed and /metrics agree', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 1 });
    const scrape = async () =>
      parsePrometheusText(await (await shop.app.http.get('/metrics')).text);
    const before = await scrape();
    await buy(shop.app.http, couponId, 'first').expect(201);
    await buy(shop.app.http, couponId, 'first').expect(409);
    await buy(shop.app.http, couponId, 'second').expect(409);
    const after = await scrape();
    const delta = (outcome: string) =>
      after.sum('flash_sale_purchases_total', { outcome }) -
      before.sum('flash_sale_purchases_total', { outcome });
    expect(delta('created')).toBe(1);
    expect(delta('already_purchased')).toBe(1);
    expect(delta('sold_out')).toBe(1);
    expect(
      after.sum('flash_sale_purchase_seconds_count') -
        before.sum('flash_sale_purchase_seconds_count'),
    ).toBe(3);

    // This instance's published figures, as the page gets them.
    const update = await shop.app.app.get(SaleFeed).snapshot();
    if (!update.ok) throw new Error(update.message);
    const self = update.instances.find((instance) => instance.self);
    expect(self).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 700));
    const later = await shop.app.app.get(SaleFeed).snapshot();
    if (!later.ok) throw new Error(later.message);
    const published = later.instances.find((instance) => instance.self)!;
    const scraped = await scrape();
    for (const outcome of PURCHASE_OUTCOMES) {
      expect(published.outcomes[outcome]).toBe(
        scraped.sum('flash_sale_purchases_total', { outcome }),
      );
    }
    expect(later.invariants[couponId]).toMatchObject({
      state: 'ok',
      orders: 1,
      buyers: 1,
    });
    expect(JSON.stringify(later.orders)).not.toContain('first');
  });

  it('turns the invariant red at once when coupons.sold disagrees with the orders', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    await buy(shop.app.http, couponId, 'honest').expect(201);
    const snapshots = shop.app.app.get(SaleSnapshots);
    const invariantsOf = async () => {
      const update = await snapshots.read();
      if (!update.ok) throw new Error(update.message);
      return update.invariants[couponId];
    };
    expect(await invariantsOf()).toMatchObject({ state: 'ok', orders: 1 });

    // Redis and the orders still agree: only the column that guards the sale is off.
    await shop.sale.db.query('update coupons set sold = 2 where id = $1', [
      couponId,
    ]);

    const check = await invariantsOf();
    expect(check).toMatchObject({ state: 'broken', sold: 2, orders: 1 });
    expect(check.problems.join()).toContain('sold (2) ≠ orders (1)');
  });

  it('has no kill route outside demo mode, and kills only listed instances in it', async () => {
    await shop.app.http
      .post('/api/demo/instances/anything/kill')
      .set(...adminAuth())
      .expect(404);
    process.env[DEMO_MODE_ENV] = '1';
    try {
      await shop.app.http.post('/api/demo/instances/anything/kill').expect(401);
      await shop.app.http
        .post('/api/demo/instances/anything/kill')
        .set(...adminAuth())
        .expect(404);
    } finally {
      delete process.env[DEMO_MODE_ENV];
    }
  });
});
