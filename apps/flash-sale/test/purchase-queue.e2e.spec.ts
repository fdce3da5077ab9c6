/**
 * The purchases an instance queues for a coupon's next turn of its lock:
 * sold together, each user once, and answered when the instance stops.
 */
import { createLockService } from '../../../test/support/lock-fixtures.js';
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  findTestPostgres,
  startApp,
  useSaleBackends,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('purchases queued for a coupon lock', () => {
  const sale = useSaleBackends(postgres!);

  const boot = () =>
    startApp({
      redisUrl: sale.redisServer.url,
      databaseUrl: sale.db.url,
      seckill: { waitTime: 5_000 },
    });

  it('sell a queue in one turn, a user queued twice once, with the same order for both answers', async () => {
    const shop = await boot();
    const holder = createLockService(sale.redisServer.url);
    try {
      const couponId = await createCoupon(shop.http, { stock: 4 });
      const batches = async () =>
        parsePrometheusText((await shop.http.get('/metrics')).text);
      const before = await batches();
      const lock = await holder.locks.acquire(`coupon:${couponId}`, {
        leaseTime: 10_000,
      });
      const users = ['amy', 'bob', 'amy', 'cy', 'dee'];
      const answers = users.map((user) =>
        buy(shop.http, couponId, user).then((response) => response),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      await lock.release();
      const responses = await Promise.all(answers);

      const amy = responses
        .filter((_, i) => users[i] === 'amy')
        .toSorted((x, y) => x.status - y.status);
      expect(amy.map((r) => r.status)).toEqual([201, 409]);
      expect(amy[1].body).toMatchObject({
        code: 'ALREADY_PURCHASED',
        orderId: amy[0].body.orderId,
      });
      for (const user of ['bob', 'cy', 'dee'])
        expect(responses[users.indexOf(user)].status).toBe(201);
      // One turn for the four users, one more for amy's second request.
      const after = await batches();
      const delta = (name: string) => after.sum(name) - before.sum(name);
      expect(delta('flash_sale_sale_batch_size_count')).toBe(2);
      expect(delta('flash_sale_sale_batch_size_sum')).toBe(5);
      await checkInvariants(sale.db, 0, couponId);
    } finally {
      await holder.close();
      await shop.close();
    }
  });

  it('answer 503 at once when the instance stops while they wait', async () => {
    const shop = await boot();
    const holder = createLockService(sale.redisServer.url);
    try {
      const couponId = await createCoupon(shop.http, { stock: 3 });
      const lock = await holder.locks.acquire(`coupon:${couponId}`, {
        leaseTime: 10_000,
      });
      const waiting = buy(shop.http, couponId, 'eve').then((r) => r);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const stoppedAt = Date.now();
      const closing = shop.close();

      const response = await waiting;

      expect(response.status).toBe(503);
      expect(response.body).toMatchObject({ code: 'UNAVAILABLE' });
      expect(Date.now() - stoppedAt).toBeLessThan(2_000);
      await closing;
      await lock.release();
      await checkInvariants(sale.db, 3, couponId);
    } finally {
      await holder.close();
      await shop.close().catch(() => undefined);
    }
  });
});
