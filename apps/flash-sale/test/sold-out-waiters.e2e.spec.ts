/**
 * Purchases queued for a coupon's lock stop waiting once it sold out, on
 * every instance: they answer 409 SOLD_OUT without taking a turn of their
 * own (the lock counts the waiting turn as aborted), instead of being served
 * one hand-off at a time only to hear the same.
 */
import { createLockService } from '../../../test/support/lock-fixtures.js';
import { parsePrometheusText } from '../../../test/support/prometheus-text.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  findTestPostgres,
  sleep,
  startApp,
  useSaleBackends,
  type TestApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

/**
 * Acquisitions of the coupon locks counted with `outcome`. Both instances run
 * in this process and share prom-client's registry: either one's /metrics
 * counts them all.
 */
async function acquisitions(
  app: TestApp,
  outcome: 'aborted' | 'acquired',
): Promise<number> {
  const metrics = parsePrometheusText((await app.http.get('/metrics')).text);
  return metrics.sum('distributed_lock_acquisitions_total', {
    name: 'coupon:<0>',
    outcome,
  });
}

describe.skipIf(!postgres)(
  'purchases waiting when the coupon sells out',
  () => {
    const sale = useSaleBackends(postgres!);

    it('answer 409 SOLD_OUT on both instances without taking their turn at the lock', async () => {
      const other = createLockService(sale.redisServer.url);
      const instances = await Promise.all(
        [0, 1].map(() =>
          startApp({
            redisUrl: sale.redisServer.url,
            databaseUrl: sale.db.url,
          }),
        ),
      );
      try {
        const [first, second] = instances;
        const couponId = await createCoupon(first.http, { stock: 1 });
        expect(await acquisitions(first, 'aborted')).toBe(0);
        expect(await acquisitions(first, 'acquired')).toBe(0);

        const held = await other.locks.acquire(`coupon:${couponId}`, {
          leaseTime: 20_000,
        });
        const buyers = ['ann', 'ben', 'cat', 'dan', 'eve', 'fay'];
        const answers = buyers.map((user, i) =>
          buy(i % 2 === 0 ? first.http : second.http, couponId, user).then(
            (response) => response,
          ),
        );
        // All six pass the precheck (one unit left) and queue for the lock.
        await sleep(400);
        expect(await held.release()).toBe(true);
        const responses = await Promise.all(answers);

        const statuses = responses.map((r) => r.status).toSorted();
        expect(statuses).toEqual([201, 409, 409, 409, 409, 409]);
        for (const refused of responses.filter((r) => r.status === 409))
          expect(refused.body).toMatchObject({ code: 'SOLD_OUT' });
        // Each instance's three purchases wait as one turn of the lock. The
        // first turn sold the unit and told the other instance's waiting turn
        // to stop: that turn is aborted, or, when the lock was handed to it
        // before the message arrived, it finds the coupon sold out at once.
        // Either way six purchases took at most two turns, one per instance.
        const aborted = await acquisitions(first, 'aborted');
        const acquired = await acquisitions(first, 'acquired');
        expect(acquired).toBeGreaterThanOrEqual(1);
        expect(aborted + acquired).toBeLessThanOrEqual(2);
        await checkInvariants(sale.db, 0, couponId);
      } finally {
        await Promise.all(instances.map((app) => app.close()));
        await other.close();
      }
    });
  },
);
