import { stockKey } from '../src/coupon/stock-cache.js';
import { buyerTag } from '../src/web/buyer-tag.js';
import {
  adminAuth,
  buy,
  couponBody,
  createCoupon,
  useSaleApp,
  findTestPostgres,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('coupon endpoints and /health', () => {
  const shop = useSaleApp(postgres!);

  describe('POST /api/coupons', () => {
    it('creates a coupon on sale from now for a day, and loads its stock into Redis', async () => {
      const before = Date.now();
      const response = await shop.app.http
        .post('/api/coupons')
        .set(...adminAuth())
        .send({ name: '  Half price  ', price: 19.99, stock: 100 })
        .expect(201);

      expect(response.body).toEqual({
        id: expect.any(Number),
        name: 'Half price',
        price: 19.99,
        stock: 100,
        startAt: expect.any(String),
        endAt: expect.any(String),
        status: 'active',
      });
      const startAt = Date.parse(response.body.startAt);
      const endAt = Date.parse(response.body.endAt);
      expect(startAt).toBeGreaterThanOrEqual(before - 1_000);
      expect(startAt).toBeLessThanOrEqual(Date.now());
      expect(endAt - startAt).toBe(24 * 3_600_000);
      expect(await shop.redis.get(stockKey(response.body.id))).toBe('100');
    });

    it('keeps an explicit window and accepts a stock of 0 and a price of 0', async () => {
      const response = await shop.app.http
        .post('/api/coupons')
        .set(...adminAuth())
        .send({
          name: 'Free',
          price: 0,
          stock: 0,
          startAt: '2030-01-01T10:00:00+02:00',
          endAt: '2030-01-01T12:00:00Z',
        })
        .expect(201);

      expect(response.body).toMatchObject({
        price: 0,
        stock: 0,
        startAt: '2030-01-01T08:00:00.000Z',
        endAt: '2030-01-01T12:00:00.000Z',
      });
    });

    it.each([
      ['a missing name', { name: undefined }],
      ['a blank name', { name: '   ' }],
      ['a name over 200 characters', { name: 'n'.repeat(201) }],
      ['a negative price', { price: -1 }],
      ['a price with 3 decimals', { price: 1.234 }],
      ['a price given as a string', { price: '9.99' }],
      ['a fractional stock', { stock: 1.5 }],
      ['a negative stock', { stock: -1 }],
      ['a stock over 1,000,000', { stock: 1_000_001 }],
      ['a stock given as a string', { stock: '10' }],
      ['a startAt that is not ISO 8601', { startAt: 'tomorrow' }],
      ['a startAt without offset', { startAt: '2030-01-01T10:00:00' }],
      ['an impossible date', { startAt: '2030-13-45T10:00:00Z' }],
      [
        'an endAt before startAt',
        { startAt: '2030-01-02T00:00:00Z', endAt: '2030-01-01T00:00:00Z' },
      ],
      ['an unknown field', { discount: 5 }],
    ])('answers 400 BAD_REQUEST for %s', async (_case, fields) => {
      const response = await shop.app.http
        .post('/api/coupons')
        .set(...adminAuth())
        .send({ ...couponBody(), ...fields })
        .expect(400);

      expect(response.body).toEqual({
        ok: false,
        code: 'BAD_REQUEST',
        message: expect.any(String),
      });
    });

    it('answers 400 for a body that is not a JSON object', async () => {
      for (const body of ['[1, 2]', '"text"', '{"name":', 'null']) {
        const response = await shop.app.http
          .post('/api/coupons')
          .set(...adminAuth())
          .set('content-type', 'application/json')
          .send(body)
          .expect(400);
        expect(response.body).toMatchObject({ ok: false, code: 'BAD_REQUEST' });
      }
    });
  });

  describe('GET /api/coupons and /api/coupons/:id', () => {
    it('shows remaining (Redis) and sold (database), newest first', async () => {
      const first = await createCoupon(shop.app.http, {
        name: 'First',
        stock: 4,
      });
      const second = await createCoupon(shop.app.http, {
        name: 'Second',
        stock: 2,
      });
      await buy(shop.app.http, first, 'u1').expect(201);
      await buy(shop.app.http, second, 'u1').expect(201);
      await buy(shop.app.http, second, 'u2').expect(201);

      const list = await shop.app.http.get('/api/coupons').expect(200);
      const ids = (list.body as { id: number }[]).map((coupon) => coupon.id);
      expect(ids.indexOf(second)).toBeLessThan(ids.indexOf(first));
      expect(list.body).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            id: first,
            name: 'First',
            stock: 4,
            remaining: 3,
            sold: 1,
            saleState: 'on_sale',
            soldOut: false,
          }),
          expect.objectContaining({
            id: second,
            remaining: 0,
            sold: 2,
            soldOut: true,
          }),
        ]),
      );

      const one = await shop.app.http.get(`/api/coupons/${first}`).expect(200);
      expect(one.body).toMatchObject({ id: first, remaining: 3, sold: 1 });

      const limited = await shop.app.http
        .get('/api/coupons?limit=1')
        .expect(200);
      expect(limited.body).toHaveLength(1);
    });

    it('answers 404 for an unknown coupon and 400 for a malformed id or limit', async () => {
      const missing = await shop.app.http
        .get('/api/coupons/424242')
        .expect(404);
      expect(missing.body).toMatchObject({ ok: false, code: 'NOT_FOUND' });
      await shop.app.http.get('/api/coupons/abc').expect(400);
      for (const limit of ['0', '1001', 'abc', '-5', '2.5']) {
        const response = await shop.app.http
          .get(`/api/coupons?limit=${limit}`)
          .expect(400);
        expect(response.body).toMatchObject({ code: 'BAD_REQUEST' });
      }
    });
  });

  describe('GET /api/coupons/:id/orders', () => {
    it('lists orders with a hash of the buyer, never the user id, newest first, up to ?limit=', async () => {
      const couponId = await createCoupon(shop.app.http, {
        stock: 5,
        price: 2.5,
      });
      for (const user of ['first', 'second', 'third']) {
        await buy(shop.app.http, couponId, user).expect(201);
      }

      const all = await shop.app.http
        .get(`/api/coupons/${couponId}/orders`)
        .expect(200);
      expect(all.body).toEqual([
        expect.objectContaining({
          buyer: buyerTag('third'),
          couponId,
          amountPaid: 2.5,
        }),
        expect.objectContaining({ buyer: buyerTag('second') }),
        expect.objectContaining({ buyer: buyerTag('first') }),
      ]);
      expect(all.body[0]).toEqual({
        id: expect.any(Number),
        couponId,
        buyer: buyerTag('third'),
        amountPaid: 2.5,
        createdAt: expect.any(String),
      });
      for (const user of ['first', 'second', 'third']) {
        expect(all.text).not.toContain(user);
      }

      const two = await shop.app.http
        .get(`/api/coupons/${couponId}/orders?limit=2`)
        .expect(200);
      expect(two.body.map((order: { buyer: string }) => order.buyer)).toEqual([
        buyerTag('third'),
        buyerTag('second'),
      ]);
      await shop.app.http.get('/api/coupons/424242/orders').expect(404);
      await shop.app.http
        .get(`/api/coupons/${couponId}/orders?limit=0`)
        .expect(400);
    });
  });

  describe('errors in general', () => {
    it('answers unknown routes with the same JSON shape', async () => {
      const response = await shop.app.http.get('/api/nothing-here').expect(404);
      expect(response.body).toEqual({
        ok: false,
        code: 'NOT_FOUND',
        message: expect.any(String),
      });
    });
  });

  describe('GET /health and an outage of Redis', () => {
    it('answers 200 when Redis and the database answer, naming the lock session', async () => {
      // Creating a coupon takes its lock, so the instance has a session.
      await createCoupon(shop.app.http, { stock: 1 });
      const response = await shop.app.http.get('/health').expect(200);
      expect(response.body).toEqual({
        ok: true,
        redis: 'up',
        database: 'up',
        lockSession: expect.any(String),
      });
      const { lockSession } = response.body as { lockSession: string };
      expect(await shop.redis.exists(`lock:session:{${lockSession}}`)).toBe(1);
    });

    it('answers 503 quickly while Redis is down, and recovers when it is back', async () => {
      const couponId = await createCoupon(shop.app.http, { stock: 3 });
      await buy(shop.app.http, couponId, 'before').expect(201);
      await shop.sale.redisServer.stop();
      try {
        const startedAt = Date.now();
        const health = await shop.app.http.get('/health').expect(503);
        expect(health.body).toMatchObject({
          ok: false,
          redis: 'down',
          database: 'up',
        });

        const purchase = await buy(shop.app.http, couponId, 'during').expect(
          503,
        );
        expect(purchase.body).toEqual({
          ok: false,
          code: 'UNAVAILABLE',
          message: expect.any(String),
        });
        const details = await shop.app.http
          .get(`/api/coupons/${couponId}`)
          .expect(503);
        expect(details.body).toMatchObject({ code: 'UNAVAILABLE' });
        expect(Date.now() - startedAt).toBeLessThan(10_000);
      } finally {
        // Back empty: the coupon's stock is reloaded from the database.
        await shop.sale.redisServer.restart();
      }
      await vi.waitFor(
        async () => {
          await shop.app.http.get('/health').expect(200);
        },
        { timeout: 5_000, interval: 100 },
      );
      await buy(shop.app.http, couponId, 'before').expect(409);
      await buy(shop.app.http, couponId, 'after').expect(201);
      const details = await shop.app.http
        .get(`/api/coupons/${couponId}`)
        .expect(200);
      expect(details.body).toMatchObject({ remaining: 1, sold: 2 });
    });
  });
});
