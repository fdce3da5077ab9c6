/**
 * A purchase whose coupon lock is lost before its commit backs out: the lock
 * handle's signal is checked inside the sale's transaction, which then rolls
 * back, and the Redis side is undone (the database proves nothing was written).
 */
import { eventually } from '../../../test/support/lock-fixtures.js';
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  findTestPostgres,
  useSaleApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('a purchase that loses its lock', () => {
  const shop = useSaleApp(postgres!, {
    // The session is renewed every 200 ms: a lapse is seen that soon.
    seckill: { sessionTtl: 600 },
  });

  /** Whether some connection waits for a lock in the test database. */
  const someoneWaits = async () =>
    (
      await shop.sale.db.query(
        `select 1 from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`,
      )
    ).length > 0;

  it('rolls back before the commit and undoes Redis: 503, no order, and the retry sells', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 2 });
    const blocker = await shop.sale.db.connect();
    let purchase: Promise<{ status: number; body: unknown }>;
    try {
      // Hold the coupon's row so that the purchase stops inside its transaction.
      await blocker.query('begin');
      await blocker.query('select 1 from coupons where id = $1 for update', [
        couponId,
      ]);
      purchase = buy(shop.app.http, couponId, 'lena').then(
        (response) => response,
      );
      await eventually(someoneWaits, 5_000);
      // The instance's lock session vanishes from Redis: its next renewal
      // finds out, and every lock bound to it, the coupon's, is lost.
      const sessions = await shop.redis.keys('lock:session:*');
      expect(sessions.length).toBeGreaterThan(0);
      await shop.redis.del(...sessions);
      await eventually(
        async () =>
          parsePrometheusText((await shop.app.http.get('/metrics')).text).sum(
            'distributed_lock_lost_total',
          ) > 0,
        3_000,
      );
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }

    const response = await purchase;

    expect(response.status).toBe(503);
    expect(response.body).toMatchObject({ ok: false, code: 'UNAVAILABLE' });
    expect(
      await shop.sale.db.query('select 1 from orders where coupon_id = $1', [
        couponId,
      ]),
    ).toEqual([]);
    expect(await shop.redis.get(stockKey(couponId))).toBe('2');
    expect(await shop.redis.sismember(buyersKey(couponId), 'lena')).toBe(0);
    await buy(shop.app.http, couponId, 'lena').expect(201);
    await checkInvariants(shop.sale.db, 1, couponId);
  });
});
