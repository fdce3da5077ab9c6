import { Inject, Injectable, Logger } from '@nestjs/common';
import pg from 'pg';
import { unavailable } from '../common/app-exception.js';
import { stockKey } from '../coupon/stock-cache.js';
import { StockReconciler } from '../coupon/stock-reconciler.js';
import type { Coupon } from '../coupon/coupon.types.js';
import { PurchaseLedger } from '../order/purchase-ledger.js';
import { SaleNotSent, SaleOutcomeUnknown } from '../order/sale-errors.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';
import type { PendingPurchase } from './pending-purchase.js';
import {
  defineSeckillScripts,
  type SeckillScripts,
} from './seckill-scripts.js';

/**
 * What a sale does when Redis and the database may disagree: after its
 * statement failed (find out what the database holds, make Redis agree,
 * answer), and when the database refused or already had what Redis sold.
 * The Redis side of a purchase is undone only when the database proves that
 * it has no order for it.
 */
@Injectable()
export class SaleSettlement {
  private readonly logger = new Logger('Seckill');
  private readonly scripts: SeckillScripts;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly ledger: PurchaseLedger,
    private readonly reconciler: StockReconciler,
  ) {
    this.scripts = defineSeckillScripts(redis);
  }

  /**
   * The statement selling `purchases` (units Redis took for them) failed with
   * `error`. Nothing sent, or refused by the server: nothing was written, so
   * Redis is undone. No answer: the server session that ran it is ended
   * first, then the orders it may have written are read; those purchases
   * succeed, the others are undone. If even that cannot be known, the coupon
   * is dropped from Redis, to be reloaded from the database before its next
   * purchase, rather than guessed.
   */
  async settleFailed(
    coupon: Coupon,
    purchases: readonly PendingPurchase[],
    error: unknown,
  ): Promise<void> {
    const answer = unavailable(error);
    if (error instanceof SaleNotSent || error instanceof pg.DatabaseError) {
      await this.undo(coupon.id, purchases);
      for (const purchase of purchases) purchase.fail(answer);
      return;
    }
    let settled: Map<string, number>;
    try {
      settled = await this.ledger.settle(
        coupon.id,
        purchases.map((purchase) => purchase.userId),
        error instanceof SaleOutcomeUnknown ? error.session : undefined,
      );
    } catch (settleError) {
      this.logger.warn(
        `The outcome of a sale of coupon ${coupon.id} is unknown (${(settleError as Error).message}); ` +
          'its stock is reloaded from the database before the next purchase',
      );
      await this.forget(coupon.id);
      for (const purchase of purchases) purchase.fail(answer);
      return;
    }
    const unsold: PendingPurchase[] = [];
    for (const purchase of purchases) {
      const orderId = settled.get(purchase.userId);
      if (orderId === undefined) unsold.push(purchase);
      else purchase.succeed(orderId);
    }
    await this.undo(coupon.id, unsold);
    for (const purchase of unsold) purchase.fail(answer);
  }

  /**
   * Rewrites the coupon's Redis state from the database (the reconciler logs
   * and counts the disagreement); `purchases` are those whose units Redis
   * took wrongly. If the rewrite fails, their units are given back and the
   * coupon is rebuilt before its next purchase.
   */
  async repairRedis(
    coupon: Coupon,
    purchases: readonly PendingPurchase[],
    waitTime?: number,
  ): Promise<void> {
    try {
      await this.reconciler.reconcile(coupon, waitTime);
    } catch (error) {
      this.logger.warn(
        `Could not repair coupon ${coupon.id} in Redis (${(error as Error).message}); ` +
          'it is reloaded from the database before the next purchase',
      );
      this.reconciler.markSuspect(coupon.id);
      await this.undo(coupon.id, purchases);
    }
  }

  /** Gives the purchases' units back in Redis; if that fails, the coupon is rebuilt before its next purchase. */
  async undo(
    couponId: number,
    purchases: readonly PendingPurchase[],
  ): Promise<void> {
    if (purchases.length === 0) return;
    try {
      await this.scripts.undo(
        couponId,
        purchases.map((purchase) => purchase.userId),
      );
    } catch (undoError) {
      this.reconciler.markSuspect(couponId);
      this.logger.warn(
        `Could not undo the Redis side of a failed sale of coupon ${couponId} ` +
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
