import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import { createLockService } from '../../../test/support/lock-fixtures.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  useSaleApp,
  findTestPostgres,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('POST /api/coupon/seckill/:couponId', () => {
  const shop = useSaleApp(postgres!, {
    // Shorter than the default 10 s so the busy test is quick, long enough
    // for the concurrent buyers to queue without timing out on a slow machine.
    seckill: { waitTime: 1_500 },
  });

  const remaining = async (couponId: number) =>
    Number(await shop.redis.get(stockKey(couponId)));

  it('sells one unit: 201 with the order id, Redis and the database agree', async () => {
    const couponId = await createCoupon(shop.app.http, {
      stock: 3,
      price: 12.5,
    });

    const response = await buy(shop.app.http, couponId, 'alice').expect(201);

    expect(response.body).toEqual({ ok: true, orderId: expect.any(Number) });
    expect(await remaining(couponId)).toBe(2);
    expect(await shop.redis.sismember(buyersKey(couponId), 'alice')).toBe(1);
    const orders = await shop.sale.db.query(
      'select id, user_id, amount_paid from orders where coupon_id = $1',
      [couponId],
    );
    expect(orders).toEqual([
      {
        id: String(response.body.orderId),
        user_id: 'alice',
        amount_paid: '12.50',
      },
    ]);
    const details = await shop.app.http
      .get(`/api/coupons/${couponId}`)
      .expect(200);
    expect(details.body).toMatchObject({ stock: 3, remaining: 2, sold: 1 });
  });

  it('sells a user one unit per coupon: 409 ALREADY_PURCHASED with the existing order the second time', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 5 });
    const first = await buy(shop.app.http, couponId, 'bob').expect(201);

    const again = await buy(shop.app.http, couponId, 'bob').expect(409);

    expect(again.body).toEqual({
      ok: false,
      code: 'ALREADY_PURCHASED',
      message: expect.any(String),
      orderId: first.body.orderId,
    });
    expect(await remaining(couponId)).toBe(4);
    await checkInvariants(shop.sale.db, 4, couponId);
  });

  it('answers 409 SOLD_OUT once the stock is gone', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 2 });
    await buy(shop.app.http, couponId, 'u1').expect(201);
    await buy(shop.app.http, couponId, 'u2').expect(201);

    const late = await buy(shop.app.http, couponId, 'u3').expect(409);

    expect(late.body).toMatchObject({ ok: false, code: 'SOLD_OUT' });
    expect(await remaining(couponId)).toBe(0);
    await checkInvariants(shop.sale.db, 0, couponId);
  });

  it('never oversells nor sells twice to a user under concurrent buyers', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 5 });
    const users = Array.from({ length: 12 }, (_, i) => `user-${i}`);
    // Every user tries twice, all at once.
    const attempts = [...users, ...users].map((user) =>
      buy(shop.app.http, couponId, user),
    );

    const responses = await Promise.all(attempts);

    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(5);
    expect(statuses.every((status) => status === 201 || status === 409)).toBe(
      true,
    );
    const winners = responses
      .filter((response) => response.status === 201)
      .map((response) => response.request.getHeader('userId'));
    expect(new Set(winners).size).toBe(5);
    const { orders } = await checkInvariants(shop.sale.db, 0, couponId);
    expect(orders).toBe(5);
    // Every client that got a success has its order in the database.
    const rows = await shop.sale.db.query<{ id: string }>(
      'select id from orders where coupon_id = $1',
      [couponId],
    );
    expect(rows.map((row) => Number(row.id)).toSorted()).toEqual(
      responses
        .filter((response) => response.status === 201)
        .map((response) => response.body.orderId)
        .toSorted(),
    );
  });

  it('answers 429 BUSY with Retry-After when the coupon lock is not free in time', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 5 });
    const holder = createLockService(shop.sale.redisServer.url);
    const lock = await holder.locks.acquire(`coupon:${couponId}`, {
      leaseTime: 10_000,
    });
    try {
      const startedAt = Date.now();
      const response = await buy(shop.app.http, couponId, 'carol').expect(429);

      expect(response.body).toEqual({
        ok: false,
        code: 'BUSY',
        message: expect.any(String),
      });
      expect(response.headers['retry-after']).toBe('1');
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_400);
      expect(await remaining(couponId)).toBe(5);
    } finally {
      await lock.release();
      await holder.close();
    }
    await buy(shop.app.http, couponId, 'carol').expect(201);
  });

  it('answers sold-out and repeat buyers without queueing for the coupon lock', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 1 });
    await buy(shop.app.http, couponId, 'gina').expect(201);
    const holder = createLockService(shop.sale.redisServer.url);
    const lock = await holder.locks.acquire(`coupon:${couponId}`, {
      leaseTime: 10_000,
    });
    try {
      // With the lock held elsewhere, anything that queued would end in 429
      // after the wait time; these are answered at once from Redis.
      const startedAt = Date.now();
      const repeat = await buy(shop.app.http, couponId, 'gina').expect(409);
      const late = await buy(shop.app.http, couponId, 'hank').expect(409);
      expect(repeat.body).toMatchObject({ code: 'ALREADY_PURCHASED' });
      expect(late.body).toMatchObject({ code: 'SOLD_OUT' });
      expect(Date.now() - startedAt).toBeLessThan(1_000);
    } finally {
      await lock.release();
      await holder.close();
    }
  });

  it('answers 404 NOT_FOUND for an unknown coupon', async () => {
    const response = await buy(shop.app.http, 999_999, 'dave').expect(404);
    expect(response.body).toMatchObject({ ok: false, code: 'NOT_FOUND' });
  });

  it('answers 409 NOT_ON_SALE before the sale starts and after it ends', async () => {
    const hour = 3_600_000;
    const upcoming = await createCoupon(shop.app.http, {
      startAt: new Date(Date.now() + hour).toISOString(),
    });
    const ended = await createCoupon(shop.app.http, {
      startAt: new Date(Date.now() - 2 * hour).toISOString(),
      endAt: new Date(Date.now() - hour).toISOString(),
    });

    for (const couponId of [upcoming, ended]) {
      const response = await buy(shop.app.http, couponId, 'erin').expect(409);
      expect(response.body).toMatchObject({ ok: false, code: 'NOT_ON_SALE' });
    }
    expect(
      await shop.sale.db.query('select 1 from orders where user_id = $1', [
        'erin',
      ]),
    ).toEqual([]);
  });

  it.each([
    ['no userId header', '1', undefined],
    ['an empty userId', '1', ''],
    ['a userId over 64 characters', '1', 'x'.repeat(65)],
    ['a userId with a colon', '1', 'a:b'],
    ['a userId with a space', '1', 'a b'],
    ['a couponId that is not a number', 'abc', 'frank'],
    ['a couponId of 0', '0', 'frank'],
    ['a negative couponId', '-1', 'frank'],
    ['a fractional couponId', '1.5', 'frank'],
    ['a couponId beyond integer range', '99999999999', 'frank'],
    ['a couponId with a leading zero', '01', 'frank'],
  ])('answers 400 BAD_REQUEST for %s', async (_case, couponId, userId) => {
    const call = shop.app.http.post(`/api/coupon/seckill/${couponId}`);
    if (userId !== undefined) call.set('userId', userId);

    const response = await call.expect(400);

    expect(response.body).toEqual({
      ok: false,
      code: 'BAD_REQUEST',
      message: expect.any(String),
    });
  });

  it('accepts the largest valid userId', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 1 });
    await buy(shop.app.http, couponId, `A-z_0${'9'.repeat(59)}`).expect(201);
  });

  it('undoes the Redis side when the order cannot be written: 503, stock and buyers restored', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    await buy(shop.app.http, couponId, 'grace').expect(201);
    await shop.sale.db.query('alter table orders rename to orders_away');
    try {
      const response = await buy(shop.app.http, couponId, 'heidi').expect(503);

      expect(response.body).toEqual({
        ok: false,
        code: 'UNAVAILABLE',
        message: expect.any(String),
      });
      expect(await remaining(couponId)).toBe(2);
      expect(await shop.redis.sismember(buyersKey(couponId), 'heidi')).toBe(0);
      expect(await shop.redis.sismember(buyersKey(couponId), 'grace')).toBe(1);
    } finally {
      await shop.sale.db.query('alter table orders_away rename to orders');
    }
    await buy(shop.app.http, couponId, 'heidi').expect(201);
    await checkInvariants(shop.sale.db, 1, couponId);
  });

  it('reloads a coupon that Redis lost while running, from the database', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    await buy(shop.app.http, couponId, 'ivan').expect(201);
    await shop.redis.del(stockKey(couponId), buyersKey(couponId));

    await buy(shop.app.http, couponId, 'ivan').expect(409);
    await buy(shop.app.http, couponId, 'judy').expect(201);

    expect(await remaining(couponId)).toBe(1);
    await checkInvariants(shop.sale.db, 1, couponId);
  });

  it('repairs Redis when the database already has the order (unique constraint)', async () => {
    const couponId = await createCoupon(shop.app.http, { stock: 3 });
    await buy(shop.app.http, couponId, 'mallory').expect(201);
    // Redis forgets the buyer but keeps the stock: only the database knows.
    await shop.redis.srem(buyersKey(couponId), 'mallory');

    const response = await buy(shop.app.http, couponId, 'mallory').expect(409);

    expect(response.body).toMatchObject({ code: 'ALREADY_PURCHASED' });
    expect(await remaining(couponId)).toBe(2);
    expect(await shop.redis.sismember(buyersKey(couponId), 'mallory')).toBe(1);
    await checkInvariants(shop.sale.db, 2, couponId);
  });
});
