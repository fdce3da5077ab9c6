import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  alreadyPurchased,
  notOnSale,
  soldOut,
  unavailable,
} from '../common/app-exception.js';
import { isUniqueViolation } from '../common/infrastructure-errors.js';
import { CouponService } from '../coupon/coupon.service.js';
import { saleState, type Coupon } from '../coupon/coupon.types.js';
import { stockKey } from '../coupon/stock-cache.js';
import { StockReconciler } from '../coupon/stock-reconciler.js';
import { OrderRepository } from '../order/order.repository.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';
import {
  BuyResult,
  defineSeckillScripts,
  type SeckillScripts,
} from './seckill-scripts.js';

/** 404 when the coupon does not exist, 409 NOT_ON_SALE outside its sale window. */
export function assertOnSale(coupon: Coupon, now = new Date()): void {
  switch (saleState(coupon, now)) {
    case 'on_sale':
      return;
    case 'upcoming':
      throw notOnSale(
        `The sale of coupon ${coupon.id} starts at ${coupon.startAt.toISOString()}`,
      );
    case 'ended':
      throw notOnSale(
        `The sale of coupon ${coupon.id} ended at ${coupon.endAt.toISOString()}`,
      );
    case 'disabled':
      throw notOnSale(`Coupon ${coupon.id} is not on sale`);
  }
}

@Injectable()
export class SeckillService {
  private readonly logger = new Logger('Seckill');
  private readonly scripts: SeckillScripts;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly coupons: CouponService,
    private readonly orders: OrderRepository,
    private readonly reconciler: StockReconciler,
  ) {
    this.scripts = defineSeckillScripts(redis);
  }

  /**
   * Sells one unit of the coupon to the user. Call it holding the coupon's
   * lock: seckill.lua alone keeps Redis right, the lock keeps Redis and the
   * database in step (no other purchase or reconciliation of this coupon
   * runs between the script and the order insert).
   */
  async purchase(
    couponId: number,
    userId: string,
  ): Promise<{ orderId: number }> {
    const coupon = await this.coupons.findForPurchase(couponId);
    assertOnSale(coupon);
    if (this.reconciler.isSuspect(couponId)) {
      await this.reconciler.reconcile(coupon);
    }

    let result = await this.scripts.buy(couponId, userId);
    if (result === BuyResult.NotLoaded) {
      // Redis lost the coupon (restarted, flushed) or never had it: load it
      // from the database under the lock we hold, then try again.
      await this.reconciler.reconcile(coupon);
      result = await this.scripts.buy(couponId, userId);
    }
    if (result === BuyResult.SoldOut) throw soldOut();
    if (result === BuyResult.AlreadyBought) throw alreadyPurchased();
    if (result !== BuyResult.Bought) {
      throw unavailable(new Error(`seckill.lua answered ${String(result)}`));
    }

    try {
      const order = await this.orders.insert({
        couponId,
        userId,
        amountPaid: coupon.price,
      });
      return { orderId: order.id };
    } catch (error) {
      return this.recoverFromFailedInsert(coupon, userId, error);
    }
  }

  /**
   * The script took a unit but the order insert failed. Make Redis agree with
   * the database again, then answer.
   */
  private async recoverFromFailedInsert(
    coupon: Coupon,
    userId: string,
    error: unknown,
  ): Promise<{ orderId: number }> {
    if (isUniqueViolation(error)) {
      // The database already has this user's order, so Redis had lost it:
      // rebuild the coupon's Redis state from the database.
      await this.reconciler
        .reconcile(coupon)
        .catch(() => this.reconciler.markSuspect(coupon.id));
      throw alreadyPurchased();
    }
    if (!reportedByServer(error)) {
      // The connection failed or timed out: the insert may have committed.
      // Look before undoing, or the unit could be sold twice.
      const existing = await this.orders
        .find(coupon.id, userId)
        .catch(() => null);
      if (existing === null) {
        // Unknown outcome: let the next purchase (on any instance) reload
        // the coupon from the database rather than trust Redis.
        await this.forget(coupon.id);
        throw unavailable(error);
      }
      if (existing !== undefined) return { orderId: existing.id };
    }
    await this.undo(coupon.id, userId);
    throw unavailable(error);
  }

  private async undo(couponId: number, userId: string): Promise<void> {
    try {
      await this.scripts.undo(couponId, userId);
    } catch (undoError) {
      this.reconciler.markSuspect(couponId);
      this.logger.warn(
        `Could not undo the Redis side of a failed purchase of coupon ${couponId} ` +
          `(${(undoError as Error).message}); it is reloaded from the database before the next one`,
      );
    }
  }

  /** Drops the coupon's stock from Redis so that the next purchase reloads it. */
  private async forget(couponId: number): Promise<void> {
    this.reconciler.markSuspect(couponId);
    await this.redis.del(stockKey(couponId)).catch(() => undefined);
  }
}

/**
 * Whether PostgreSQL itself rejected the statement (an error with a SQLSTATE
 * other than a connection failure): then nothing was written.
 */
function reportedByServer(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    typeof code === 'string' &&
    /^[0-9A-Z]{5}$/.test(code) &&
    !code.startsWith('08')
  );
}
