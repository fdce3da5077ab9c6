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
import type { PurchaseLedger } from '../src/order/purchase-ledger.js';
import { SeckillService } from '../src/seckill/seckill.service.js';
import { SoldOutBoard } from '../src/seckill/sold-out-board.js';

const lostConnection = () => new Error('Connection terminated unexpectedly');

/**
 * The purchase logic with the database replaced by stubs, to reach outcomes
 * a real database rarely produces on demand: a connection that dies after
 * the sale's transaction was sent, when nobody knows whether it committed.
 */
describe('SeckillService when the sale transaction fails', () => {
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

  function service(ledger: Partial<PurchaseLedger>) {
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
        {
          find: () => Promise.resolve(undefined),
        } as unknown as OrderRepository,
        ledger as PurchaseLedger,
        reconciler as unknown as StockReconciler,
        new SoldOutBoard(redis),
      ),
    };
  }

  it('answers success, and undoes nothing, when the unanswered commit did commit', async () => {
    const { seckill } = service({
      record: () => Promise.reject(lostConnection()),
      settledOrder: () => Promise.resolve({ id: 42 }),
    });

    await expect(seckill.purchase(1, 'u')).resolves.toEqual({ orderId: 42 });
    expect(await redis.get(stockKey(1))).toBe('2');
    expect(await redis.sismember(buyersKey(1), 'u')).toBe(1);
  });

  it('undoes the purchase when the database proves the unanswered commit did not commit', async () => {
    const { seckill } = service({
      record: () => Promise.reject(lostConnection()),
      settledOrder: () => Promise.resolve(undefined),
    });

    const error = await seckill.purchase(1, 'u').catch((e: unknown) => e);

    expect((error as AppException).code).toBe('UNAVAILABLE');
    expect(await redis.get(stockKey(1))).toBe('3');
    expect(await redis.sismember(buyersKey(1), 'u')).toBe(0);
  });

  it('drops the coupon from Redis when the outcome cannot be known, so it is reloaded', async () => {
    const { seckill, suspects } = service({
      record: () => Promise.reject(lostConnection()),
      settledOrder: () => Promise.reject(lostConnection()),
    });

    const error = await seckill.purchase(1, 'u').catch((e: unknown) => e);

    expect((error as AppException).code).toBe('UNAVAILABLE');
    expect(await redis.exists(stockKey(1))).toBe(0);
    expect(suspects.has(1)).toBe(true);
  });

  it('undoes at once when the database rejected the transaction', async () => {
    const settledOrder = vi.fn();
    const { seckill } = service({
      record: () =>
        Promise.reject(
          Object.assign(new Error('relation "orders" does not exist'), {
            code: '42P01',
          }),
        ),
      settledOrder,
    });

    await expect(seckill.purchase(1, 'u')).rejects.toBeInstanceOf(AppException);
    expect(settledOrder).not.toHaveBeenCalled();
    expect(await redis.get(stockKey(1))).toBe('3');
  });
});
