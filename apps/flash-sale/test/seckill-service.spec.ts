import { Redis } from 'ioredis';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';
import { AppException } from '../src/common/app-exception.js';
import type { CouponService } from '../src/coupon/coupon.service.js';
import type { Coupon } from '../src/coupon/coupon.types.js';
import type { StockReconciler } from '../src/coupon/stock-reconciler.js';
import type { OrderRepository } from '../src/order/order.repository.js';
import { SeckillService } from '../src/seckill/seckill.service.js';

const lostConnection = () => new Error('Connection terminated unexpectedly');

/**
 * The purchase logic with the database replaced by stubs, to reach outcomes
 * a real database rarely produces on demand: a connection that dies after
 * the insert was sent, when nobody knows whether it committed.
 */
describe('SeckillService when the order insert fails', () => {
  let server: RedisServerHandle;
  let redis: Redis;
  const coupon: Coupon = {
    id: 1,
    name: 'c',
    price: 5,
    stock: 3,
    startAt: new Date(Date.now() - 60_000),
    endAt: new Date(Date.now() + 3_600_000),
    status: 'active',
  };

  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
  });

  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  beforeEach(async () => {
    await redis.flushall();
    await redis.set(stockKey(1), 3);
  });

  function service(orders: Partial<OrderRepository>) {
    const suspects = new Set<number>();
    const reconciler = {
      isSuspect: (id: number) => suspects.has(id),
      markSuspect: (id: number) => void suspects.add(id),
      reconcile: vi.fn(() => Promise.resolve({ remaining: 0, sold: 0 })),
    };
    const coupons = { findForPurchase: () => Promise.resolve(coupon) };
    return {
      suspects,
      seckill: new SeckillService(
        redis,
        coupons as unknown as CouponService,
        orders as OrderRepository,
        reconciler as unknown as StockReconciler,
      ),
    };
  }

  it('answers success when the lost insert did commit', async () => {
    const { seckill } = service({
      insert: () => Promise.reject(lostConnection()),
      find: () => Promise.resolve({ id: 42 }),
    });

    await expect(seckill.purchase(1, 'u')).resolves.toEqual({ orderId: 42 });
    expect(await redis.get(stockKey(1))).toBe('2');
    expect(await redis.sismember(buyersKey(1), 'u')).toBe(1);
  });

  it('undoes the purchase when the lost insert did not commit', async () => {
    const { seckill } = service({
      insert: () => Promise.reject(lostConnection()),
      find: () => Promise.resolve(undefined),
    });

    const error = await seckill.purchase(1, 'u').catch((e: unknown) => e);

    expect((error as AppException).code).toBe('UNAVAILABLE');
    expect(await redis.get(stockKey(1))).toBe('3');
    expect(await redis.sismember(buyersKey(1), 'u')).toBe(0);
  });

  it('drops the coupon from Redis when the outcome cannot be known, so it is reloaded', async () => {
    const { seckill, suspects } = service({
      insert: () => Promise.reject(lostConnection()),
      find: () => Promise.reject(lostConnection()),
    });

    const error = await seckill.purchase(1, 'u').catch((e: unknown) => e);

    expect((error as AppException).code).toBe('UNAVAILABLE');
    expect(await redis.exists(stockKey(1))).toBe(0);
    expect(suspects.has(1)).toBe(true);
  });

  it('undoes at once when the database rejected the insert', async () => {
    const find = vi.fn();
    const { seckill } = service({
      insert: () =>
        Promise.reject(
          Object.assign(new Error('relation "orders" does not exist'), {
            code: '42P01',
          }),
        ),
      find,
    });

    await expect(seckill.purchase(1, 'u')).rejects.toBeInstanceOf(AppException);
    expect(find).not.toHaveBeenCalled();
    expect(await redis.get(stockKey(1))).toBe('3');
  });
});
