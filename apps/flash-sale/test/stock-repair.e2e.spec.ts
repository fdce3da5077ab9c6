/**
 * Ghost repair while running: every STOCK_REPAIR_INTERVAL_MS each instance
 * compares Redis and `coupons.sold` with the orders of the coupons on sale,
 * under each coupon's lock (skipped while busy), and repairs what differs.
 */
import { Redis } from 'ioredis';
import {
  createLockService,
  eventually,
} from '../../../test/support/lock-fixtures.js';
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  findTestPostgres,
  sleep,
  startApp,
  useSaleApp,
  useSaleBackends,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('periodic stock repair', () => {
  const shop = useSaleApp(postgres!, { stockRepairInterval: 200 });

  const repairs = async (side: 'redis' | 'database') =>
    parsePrometheusText(
      (await shop.app.http.get('/metrics').expect(200)).text,
    ).sum('flash_sale_stock_repairs_total', { side });
  const remaining = async (couponId: number) =>
    Number(await shop.redis.get(stockKey(couponId)));

  /** What a process that died right after seckill.lua leaves: a unit taken, a buyer without an order. */
  async function addGhost(couponId: number, userId: string): Promise<void> {
    await shop.redis.decr(stockKey(couponId));
    await shop.redis.sadd(buyersKey(couponId), userId);
  }

  it('repairs a ghost in Redis without a restart, and counts it', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 2 });
    await buy(shop.app.http, couponId, 'real').expect(201);
    const before = await repairs('redis');
    await addGhost(couponId, 'ghost');
    expect(await remaining(couponId)).toBe(0);

    await eventually(async () => (await remaining(couponId)) === 1, 3_000);

    expect(await shop.redis.smembers(buyersKey(couponId))).toEqual(['real']);
    expect(await repairs('redis')).toBeGreaterThan(before);
    await buy(shop.app.http, couponId, 'ghost').expect(201);
    await checkInvariants(shop.sale.db, 0, couponId);
  });

  it("repairs a ghost that took a real buyer's place in Redis (counts unchanged), and counts it", async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    await buy(shop.app.http, couponId, 'real').expect(201);
    const before = await repairs('redis');
    // One buyer lost, one ghost added: as many buyers and units left as before.
    await shop.redis
      .multi()
      .srem(buyersKey(couponId), 'real')
      .sadd(buyersKey(couponId), 'ghost')
      .exec();

    await eventually(
      async () =>
        (await shop.redis.sismember(buyersKey(couponId), 'real')) === 1,
      3_000,
    );

    expect(await shop.redis.smembers(buyersKey(couponId))).toEqual(['real']);
    expect(await remaining(couponId)).toBe(2);
    expect(await repairs('redis')).toBeGreaterThan(before);
    await buy(shop.app.http, couponId, 'real').expect(409);
    await buy(shop.app.http, couponId, 'ghost').expect(201);
    await checkInvariants(shop.sale.db, 1, couponId);
  });

  it('repairs coupons.sold when it disagrees with the orders, and counts it', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 4 });
    await buy(shop.app.http, couponId, 'a').expect(201);
    await buy(shop.app.http, couponId, 'b').expect(201);
    const before = await repairs('database');
    await shop.sale.db.query('update coupons set sold = 0 where id = $1', [
      couponId,
    ]);

    await eventually(async () => {
      const [row] = await shop.sale.db.query<{ sold: number }>(
        'select sold from coupons where id = $1',
        [couponId],
      );
      return row.sold === 2;
    }, 3_000);

    expect(await repairs('database')).toBeGreaterThan(before);
    expect(await remaining(couponId)).toBe(2);
  });

  it('leaves a coupon whose lock is busy alone, and repairs it once the lock is free', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    const other = createLockService(shop.sale.redisServer.url);
    const lock = await other.locks.acquire(`coupon:${couponId}`, {
      leaseTime: 10_000,
    });
    try {
      await addGhost(couponId, 'ghost');
      await sleep(800);
      expect(await remaining(couponId)).toBe(2);
    } finally {
      await lock.release();
      await other.close();
    }

    await eventually(async () => (await remaining(couponId)) === 3, 3_000);
    expect(await shop.redis.scard(buyersKey(couponId))).toBe(0);
  });

  it('survives passes that fail (database unavailable), and repairs once it is back', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    await shop.sale.db.query('alter table orders rename to orders_away');
    try {
      await addGhost(couponId, 'ghost');
      await sleep(700);
      expect(await remaining(couponId)).toBe(2);
    } finally {
      await shop.sale.db.query('alter table orders_away rename to orders');
    }

    await eventually(async () => (await remaining(couponId)) === 3, 3_000);
    await buy(shop.app.http, couponId, 'after').expect(201);
  });
});

describe.skipIf(!postgres)('startup reconciliation', () => {
  const sale = useSaleBackends(postgres!);

  it('does not wait out a stuck coupon lock: the app starts, and the first purchase repairs the coupon', async () => {
    const first = await startApp({
      redisUrl: sale.redisServer.url,
      databaseUrl: sale.db.url,
    });
    const couponId = await createCoupon(first.http, { stock: 2 });
    await first.close();
    const redis = new Redis(sale.redisServer.url);
    const other = createLockService(sale.redisServer.url);
    // A holder that died with a long lease: nobody frees it for 20 s.
    const stuck = await other.locks.acquire(`coupon:${couponId}`, {
      leaseTime: 20_000,
    });
    try {
      await redis.decr(stockKey(couponId));
      await redis.sadd(buyersKey(couponId), 'ghost');
      const startedAt = Date.now();

      const second = await startApp({
        redisUrl: sale.redisServer.url,
        databaseUrl: sale.db.url,
        seckill: { waitTime: 500 },
      });

      try {
        expect(Date.now() - startedAt).toBeLessThan(5_000);
        await stuck.release();
        await buy(second.http, couponId, 'ghost').expect(201);
        expect(await redis.get(stockKey(couponId))).toBe('1');
        await checkInvariants(sale.db, 1, couponId);
      } finally {
        await second.close();
      }
    } finally {
      await stuck.release();
      await other.close();
      redis.disconnect();
    }
  });
});
