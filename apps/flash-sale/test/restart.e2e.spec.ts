import { Redis } from 'ioredis';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import { createLockService } from '../../../test/support/lock-fixtures.js';
import type { AppConfigOverrides } from '../src/config/app-config.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  useSaleBackends,
  createTestDatabase,
  findTestPostgres,
  sleep,
  startApp,
  type TestApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('restarting the app', () => {
  const sale = useSaleBackends(postgres!);
  let redis: Redis;
  const running: TestApp[] = [];

  async function boot(config: AppConfigOverrides = {}): Promise<TestApp> {
    const app = await startApp({
      redisUrl: sale.redisServer.url,
      databaseUrl: sale.db.url,
      ...config,
    });
    running.push(app);
    return app;
  }

  async function stop(app: TestApp): Promise<void> {
    running.splice(running.indexOf(app), 1);
    await app.close();
  }

  beforeAll(async () => {
    redis = new Redis(sale.redisServer.url);
    redis.on('error', () => undefined);
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((app) => app.close()));
  });

  afterAll(async () => {
    redis?.disconnect();
  });

  const remaining = async (couponId: number) =>
    Number(await redis.get(stockKey(couponId)));

  it('keeps one order per user after Redis lost everything (FLUSHALL)', async () => {
    const first = await boot();
    const couponId = await createCoupon(first.http, { stock: 3 });
    await buy(first.http, couponId, 'u1').expect(201);
    await buy(first.http, couponId, 'u2').expect(201);
    await stop(first);
    await redis.flushall();

    const second = await boot();

    expect(await remaining(couponId)).toBe(1);
    expect((await redis.smembers(buyersKey(couponId))).toSorted()).toEqual([
      'u1',
      'u2',
    ]);
    await buy(second.http, couponId, 'u1').expect(409);
    await buy(second.http, couponId, 'u3').expect(201);
    const soldOut = await buy(second.http, couponId, 'u4').expect(409);
    expect(soldOut.body).toMatchObject({ code: 'SOLD_OUT' });
    await checkInvariants(sale.db, 0, couponId);
  });

  it('repairs Redis after a process died between the Lua script and the order insert', async () => {
    const first = await boot();
    const couponId = await createCoupon(first.http, { stock: 2 });
    await buy(first.http, couponId, 'real').expect(201);
    await stop(first);
    // What a crash right after seckill.lua leaves behind: a unit taken, a
    // buyer recorded, no order in the database.
    await redis.decr(stockKey(couponId));
    await redis.sadd(buyersKey(couponId), 'ghost');
    expect(await remaining(couponId)).toBe(0);

    const second = await boot();

    expect(await remaining(couponId)).toBe(1);
    expect(await redis.smembers(buyersKey(couponId))).toEqual(['real']);
    await buy(second.http, couponId, 'ghost').expect(201);
    await checkInvariants(sale.db, 0, couponId);
  });

  it('loads coupons whose sale is open or still to come, not ended ones', async () => {
    const hour = 3_600_000;
    const first = await boot();
    const upcoming = await createCoupon(first.http, {
      stock: 7,
      startAt: new Date(Date.now() + hour).toISOString(),
    });
    const ended = await createCoupon(first.http, {
      stock: 7,
      startAt: new Date(Date.now() - 2 * hour).toISOString(),
      endAt: new Date(Date.now() - hour).toISOString(),
    });
    await stop(first);
    await redis.flushall();

    const second = await boot();

    expect(await redis.get(stockKey(upcoming))).toBe('7');
    expect(await redis.get(stockKey(ended))).toBeNull();
    // Shown from the database all the same.
    const details = await second.http.get(`/api/coupons/${ended}`).expect(200);
    expect(details.body).toMatchObject({
      remaining: 7,
      sold: 0,
      saleState: 'ended',
    });
  });

  it('reconciles a coupon only under its lock, so it never races with a sale on another instance', async () => {
    const first = await boot();
    const couponId = await createCoupon(first.http, { stock: 5 });
    await buy(first.http, couponId, 'early').expect(201);

    // Another instance is in the middle of a purchase: it holds the lock and
    // its script already ran, its order insert has not happened yet.
    const other = createLockService(sale.redisServer.url);
    const lock = await other.locks.acquire(`coupon:${couponId}`, {
      leaseTime: 20_000,
    });
    await redis.decr(stockKey(couponId));
    await redis.sadd(buyersKey(couponId), 'in-flight');
    let started = false;
    const starting = boot().then((app) => {
      started = true;
      return app;
    });
    try {
      await sleep(800);
      expect(started).toBe(false);
      // The other instance writes its order and lets go.
      await sale.db.query(
        'insert into orders (coupon_id, user_id, amount_paid) values ($1, $2, $3)',
        [couponId, 'in-flight', 9.99],
      );
    } finally {
      await lock.release();
      await other.close();
    }
    const second = await starting;

    expect(await remaining(couponId)).toBe(3);
    await buy(second.http, couponId, 'in-flight').expect(409);
    await checkInvariants(sale.db, 3, couponId);
  });

  it('undoes a purchase whose insert the database cancelled for being too slow', async () => {
    // Statements get twice the backend timeout before the server cancels them.
    const app = await boot({ backendTimeout: 300 });
    const couponId = await createCoupon(app.http, { stock: 2 });
    const blocker = await sale.db.connect();
    try {
      await blocker.query('begin');
      await blocker.query('lock table orders in access exclusive mode');
      const startedAt = Date.now();

      const response = await buy(app.http, couponId, 'slow').expect(503);

      expect(response.body).toMatchObject({ code: 'UNAVAILABLE' });
      expect(Date.now() - startedAt).toBeLessThan(5_000);
      expect(await remaining(couponId)).toBe(2);
      expect(await redis.sismember(buyersKey(couponId), 'slow')).toBe(0);
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }
    await buy(app.http, couponId, 'slow').expect(201);
    await checkInvariants(sale.db, 1, couponId);
  });

  it('lets instances that start together on an empty database migrate it once', async () => {
    const fresh = await createTestDatabase(postgres!);
    // Coupon ids restart at 1 in the new database: clear the old ones' keys.
    await redis.flushall();
    try {
      const apps = await Promise.all(
        [1, 2, 3].map(() =>
          startApp({ redisUrl: sale.redisServer.url, databaseUrl: fresh.url }),
        ),
      );
      running.push(...apps);
      const migrations = await fresh.query<{ name: string }>(
        'select name from kysely_migration',
      );
      expect(migrations).toEqual([
        { name: '0001-create-coupons-and-orders' },
        { name: '0002-count-sold-units' },
      ]);
      const couponId = await createCoupon(apps[0].http, { stock: 1 });
      await buy(apps[1].http, couponId, 'x').expect(201);
      await buy(apps[2].http, couponId, 'y').expect(409);
    } finally {
      await Promise.all(running.splice(0).map((app) => app.close()));
      await fresh.drop();
    }
  });
});
