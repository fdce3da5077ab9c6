/**
 * A purchase whose coupon lock is lost. Lost before its sale's statement is
 * sent: it backs out (the lock handle's signal is checked with a database
 * connection in hand), nothing is written and Redis is undone. Lost while
 * the statement runs: the statement's own guard and the unique order per
 * user decide, so the sale is safe whoever holds the lock, and a retry
 * returns the order.
 */
import { eventually, sleep } from '../../../test/support/lock-fixtures.js';
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import { DATABASE } from '../src/database/database.module.js';
import type { Db } from '../src/database/database.types.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  findTestPostgres,
  useSaleApp,
  type SaleApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

/**
 * Makes the app's lock session vanish from Redis: its next renewal (every
 * 200 ms here) finds out, and every lock bound to it, the coupon's, is lost.
 */
async function loseTheLocks(shop: SaleApp): Promise<void> {
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
}

describe.skipIf(!postgres)('a purchase that loses its lock', () => {
  const shop = useSaleApp(postgres!, {
    seckill: { sessionTtl: 600 },
    // One connection, which the test can take away; coupons cached, so that
    // the purchase needs the connection only for its sale.
    dbPoolSize: 1,
    couponCacheTtl: 60_000,
  });

  it('before its statement is sent: backs out, 503, no order, Redis undone, and the retry sells', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    // Caches the coupon and loads it into Redis.
    await buy(shop.app.http, couponId, 'warm').expect(201);
    const db = shop.app.app.get<symbol, Db>(DATABASE);
    let letGo!: () => void;
    const taken = new Promise<void>((resolve) => (letGo = resolve));
    const holding = db.connection().execute(() => taken);
    const purchase = buy(shop.app.http, couponId, 'lena').then((r) => r);
    try {
      // The purchase takes the lock, runs the script and waits for a connection.
      await eventually(
        async () =>
          (await shop.redis.sismember(buyersKey(couponId), 'lena')) === 1,
        5_000,
      );
      await loseTheLocks(shop);
    } finally {
      letGo();
      await holding;
    }

    const response = await purchase;
    expect(response.status).toBe(503);
    expect(response.body).toMatchObject({ ok: false, code: 'UNAVAILABLE' });
    expect(
      await shop.sale.db.query(
        'select 1 from orders where coupon_id = $1 and user_id = $2',
        [couponId, 'lena'],
      ),
    ).toEqual([]);
    expect(await shop.redis.get(stockKey(couponId))).toBe('2');
    expect(await shop.redis.sismember(buyersKey(couponId), 'lena')).toBe(0);
    await buy(shop.app.http, couponId, 'lena').expect(201);
    await checkInvariants(shop.sale.db, 1, couponId);
  });

  it('while its statement runs: the database decides, one order, Redis agrees, and the retry returns it', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 2 });
    await buy(shop.app.http, couponId, 'warm').expect(201);
    /** Whether some connection waits for a row lock in the test database. */
    const someoneWaits = async () =>
      (
        await shop.sale.db.query(
          `select 1 from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'`,
        )
      ).length > 0;
    const blocker = await shop.sale.db.connect();
    let purchase: Promise<{ status: number; body: unknown }>;
    try {
      // Hold the coupon's row: the purchase's statement waits for it.
      await blocker.query('begin');
      await blocker.query('select 1 from coupons where id = $1 for update', [
        couponId,
      ]);
      purchase = buy(shop.app.http, couponId, 'mia').then((r) => r);
      await eventually(someoneWaits, 5_000);
      await loseTheLocks(shop);
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }

    const response = await purchase;
    // The statement committed after the lock was lost: the client hears
    // that the outcome is unknown (503), or of its order.
    expect([201, 503]).toContain(response.status);
    const orders = await shop.sale.db.query<{ id: string }>(
      'select id from orders where coupon_id = $1 and user_id = $2',
      [couponId, 'mia'],
    );
    expect(orders).toHaveLength(1);
    await sleep(100);
    expect(await shop.redis.get(stockKey(couponId))).toBe('0');
    expect(await shop.redis.sismember(buyersKey(couponId), 'mia')).toBe(1);
    const retry = await buy(shop.app.http, couponId, 'mia').expect(409);
    expect(retry.body).toMatchObject({
      code: 'ALREADY_PURCHASED',
      orderId: Number(orders[0].id),
    });
    await checkInvariants(shop.sale.db, 0, couponId);
  });
});
