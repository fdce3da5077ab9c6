/**
 * The app's `/metrics`: a real Prometheus scrape after real purchases, and
 * the page's lock figures (`/api/events`) read from the same numbers.
 */
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import { SaleFeed, type SaleUpdate } from '../src/web/sale-feed.service.js';
import {
  buy,
  createCoupon,
  findTestPostgres,
  useSaleApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('GET /metrics', () => {
  const shop = useSaleApp(postgres!);

  it('counts the turns of the coupon lock by its template and the purchases each sold, and the page shows the same figures', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 10 });
    const before = parsePrometheusText(
      (await shop.app.http.get('/metrics').expect(200)).text,
    );
    const acquisitions = 'distributed_lock_acquisitions_total';
    const granted = { name: 'coupon:<0>', outcome: 'acquired' };
    const start = before.sum(acquisitions, granted);

    await Promise.all(
      ['ann', 'ben', 'cid', 'dee'].map((user) =>
        buy(shop.app.http, couponId, user).expect(201),
      ),
    );

    const response = await shop.app.http.get('/metrics').expect(200);
    expect(response.headers['content-type']).toContain('text/plain');
    const after = parsePrometheusText(response.text);
    // The four purchases went in turns of the coupon's lock, several to a
    // turn when they queued together: every purchase sold in one.
    const turns = after.sum(acquisitions, granted) - start;
    expect(turns).toBeGreaterThanOrEqual(1);
    expect(turns).toBeLessThanOrEqual(4);
    const batches = 'flash_sale_sale_batch_size';
    expect(after.sum(`${batches}_sum`) - before.sum(`${batches}_sum`)).toBe(4);
    expect(after.sum(`${batches}_count`) - before.sum(`${batches}_count`)).toBe(
      turns,
    );
    // Keys never become labels: every coupon is one series, under the
    // decorator's template (or `coupon:*` for the service's direct calls).
    for (const name of after.values(acquisitions, 'name'))
      expect(name).toMatch(/^coupon:(<0>|\*)$/);
    expect(after.sum('distributed_lock_wait_seconds_count', granted)).toBe(
      after.sum(acquisitions, granted),
    );
    expect(after.sum('distributed_lock_holds')).toBe(0);

    const update = (await shop.app.app
      .get(SaleFeed)
      .snapshot()) as SaleUpdate & {
      ok: true;
    };
    expect(update.ok).toBe(true);
    expect(update.locks.acquisitions.acquired).toBe(
      after.sum(acquisitions, { outcome: 'acquired' }),
    );
    expect(update.locks.holds).toBe(0);
    expect(update.locks.waitP99Ms).toBeGreaterThan(0);
  });
});
