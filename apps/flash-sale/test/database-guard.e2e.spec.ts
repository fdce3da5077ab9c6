/**
 * The database is the last line: one transaction takes a unit from
 * `coupons.sold` only while `sold < stock` and writes the order, so a Redis
 * count that is wrong, or no lock at all, cannot oversell. A disagreement
 * found that way is logged, counted and repaired from the database.
 */
import { Redis } from 'ioredis';
import { Kysely, PostgresDialect } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import { migrations } from '../src/database/migrations/index.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  createTestDatabase,
  findTestPostgres,
  startApp,
  useSaleBackends,
  type TestApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('the database refuses an oversale', () => {
  const sale = useSaleBackends(postgres!);
  let redis: Redis;
  let locked: TestApp;
  let unlocked: TestApp;

  beforeAll(async () => {
    redis = new Redis(sale.redisServer.url);
    redis.on('error', () => undefined);
    const backends = {
      redisUrl: sale.redisServer.url,
      databaseUrl: sale.db.url,
    };
    [locked, unlocked] = await Promise.all([
      startApp({ ...backends, seckill: { waitTime: 5_000 } }),
      startApp({ ...backends, seckill: { waitTime: 5_000, lock: false } }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([locked?.close(), unlocked?.close()]);
    redis?.disconnect();
  });

  const redisRepairs = async () =>
    parsePrometheusText(
      (await locked.http.get('/metrics').expect(200)).text,
    ).sum('flash_sale_stock_repairs_total', { side: 'redis' });
  const soldColumn = async (couponId: number) =>
    (
      await sale.db.query<{ sold: number }>(
        'select sold from coupons where id = $1',
        [couponId],
      )
    )[0].sold;

  it('sells exactly the stock without the lock while Redis claims ten times as much; the rest get 409 SOLD_OUT and Redis is repaired', async () => {
    const couponId = await createCoupon(locked.http, { stock: 2 });
    await redis.set(stockKey(couponId), 20);
    const repairsBefore = await redisRepairs();
    const users = Array.from({ length: 8 }, (_, i) => `crowd-${i}`);

    const responses = await Promise.all(
      users.map((user) => buy(unlocked.http, couponId, user)),
    );

    const sold = responses.filter((response) => response.status === 201);
    const refused = responses.filter((response) => response.status === 409);
    expect(sold).toHaveLength(2);
    expect(refused).toHaveLength(6);
    for (const response of refused) {
      expect(response.body).toMatchObject({ ok: false, code: 'SOLD_OUT' });
    }
    expect(await soldColumn(couponId)).toBe(2);
    // Redis now says what the database says: nothing left, the two buyers.
    expect(await redis.get(stockKey(couponId))).toBe('0');
    expect((await redis.smembers(buyersKey(couponId))).toSorted()).toEqual(
      sold.map((response) => response.request.getHeader('userId')).toSorted(),
    );
    expect(await redisRepairs()).toBeGreaterThan(repairsBefore);
    await checkInvariants(sale.db, 0, couponId);
  });

  it('refuses it under the lock too: the sale Redis allowed is answered SOLD_OUT, counted once, and Redis repaired', async () => {
    const couponId = await createCoupon(locked.http, { stock: 1 });
    await buy(locked.http, couponId, 'first').expect(201);
    await redis.set(stockKey(couponId), 3);
    const repairsBefore = await redisRepairs();

    const refused = await buy(locked.http, couponId, 'second').expect(409);

    expect(refused.body).toMatchObject({ code: 'SOLD_OUT' });
    expect(await redisRepairs()).toBe(repairsBefore + 1);
    expect(await redis.get(stockKey(couponId))).toBe('0');
    expect(await redis.smembers(buyersKey(couponId))).toEqual(['first']);
    // Answered from Redis again, with nothing left to repair.
    await buy(locked.http, couponId, 'third').expect(409);
    expect(await redisRepairs()).toBe(repairsBefore + 1);
    await checkInvariants(sale.db, 0, couponId);
  });

  it('sells a batch Redis overcounted one statement each, up to what the database has, under the lock', async () => {
    const couponId = await createCoupon(locked.http, { stock: 3 });
    await buy(locked.http, couponId, 'first').expect(201);
    // Redis claims 20 left where the database has 2.
    await redis.set(stockKey(couponId), 20);
    const users = Array.from({ length: 8 }, (_, i) => `batch-${i}`);

    // Queued together, they sell in one turn: its statement for all eight
    // fails the CHECK, and each then gets a statement of its own.
    const responses = await Promise.all(
      users.map((user) => buy(locked.http, couponId, user)),
    );

    const statuses = responses.map((response) => response.status).toSorted();
    expect(statuses).toEqual([201, 201, 409, 409, 409, 409, 409, 409]);
    for (const response of responses.filter((r) => r.status === 409)) {
      expect(response.body).toMatchObject({ code: 'SOLD_OUT' });
    }
    expect(await soldColumn(couponId)).toBe(3);
    expect(await redis.get(stockKey(couponId))).toBe('0');
    expect(await redis.scard(buyersKey(couponId))).toBe(3);
    await checkInvariants(sale.db, 0, couponId);
  });

  it('has the database itself refuse a sold count beyond the stock (CHECK)', async () => {
    const couponId = await createCoupon(locked.http, { stock: 1 });
    await buy(locked.http, couponId, 'only').expect(201);

    const error = await sale.db
      .query('update coupons set sold = sold + 1 where id = $1', [couponId])
      .catch((e: unknown) => e);

    expect((error as { code?: string }).code).toBe('23514');
    expect(await soldColumn(couponId)).toBe(1);
  });

  it('answers a repeat purchase with the existing order, and a ghost buyer in Redis with a sale, never a false 409', async () => {
    const couponId = await createCoupon(locked.http, { stock: 3 });
    const first = await buy(locked.http, couponId, 'rita').expect(201);
    // Redis forgets rita: only the database knows she bought.
    await redis.srem(buyersKey(couponId), 'rita');
    await redis.incr(stockKey(couponId));
    const retry = await buy(locked.http, couponId, 'rita').expect(409);
    expect(retry.body).toMatchObject({
      code: 'ALREADY_PURCHASED',
      orderId: first.body.orderId,
    });
    // A buyer recorded by a purchase that never committed.
    await redis.sadd(buyersKey(couponId), 'gus');
    await redis.decr(stockKey(couponId));

    const ghost = await buy(locked.http, couponId, 'gus').expect(201);

    const orders = await sale.db.query<{ id: string; user_id: string }>(
      'select id, user_id from orders where coupon_id = $1 order by id',
      [couponId],
    );
    expect(orders.map((row) => [Number(row.id), row.user_id])).toEqual([
      [first.body.orderId, 'rita'],
      [ghost.body.orderId, 'gus'],
    ]);
    await checkInvariants(sale.db, 1, couponId);
  });

  it('backfills sold from the orders written before the column existed', async () => {
    const old = await createTestDatabase(postgres!);
    const db = new Kysely<any>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: old.url, max: 1 }),
      }),
    });
    try {
      const migrator = new Migrator({
        db,
        provider: { getMigrations: () => Promise.resolve(migrations) },
      });
      expect(
        (await migrator.migrateTo('0001-create-coupons-and-orders')).error,
      ).toBeUndefined();
      await old.query(
        `insert into coupons (name, price, stock, start_at, end_at)
         values ('old', 1, 5, now(), now() + interval '1 day')`,
      );
      await old.query(
        `insert into orders (coupon_id, user_id, amount_paid)
         values (1, 'a', 1), (1, 'b', 1)`,
      );

      expect((await migrator.migrateToLatest()).error).toBeUndefined();

      expect(await old.query('select stock, sold from coupons')).toEqual([
        { stock: 5, sold: 2 },
      ]);
    } finally {
      await db.destroy();
      await old.drop();
    }
  });
});
