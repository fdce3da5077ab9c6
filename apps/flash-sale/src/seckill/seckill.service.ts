import { Inject, Injectable, Logger } from '@nestjs/common';
import { currentLock } from '@app/distributed-lock';
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
import { registerSaleStepMetric, timeSaleStep } from '../metrics/sale-steps.js';
import { OrderRepository } from '../order/order.repository.js';
import {
  PurchaseLedger,
  type LedgerOutcome,
} from '../order/purchase-ledger.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';
import {
  BuyResult,
  defineSeckillScripts,
  type SeckillScripts,
} from './seckill-scripts.js';
import { SoldOutBoard } from './sold-out-board.js';

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

/** How long a purchase without the lock (SECKILL_LOCK=off) waits for it to repair the coupon. */
const UNLOCKED_REPAIR_WAIT_MS = 1_000;

@Injectable()
export class SeckillService {
  private readonly logger = new Logger('Seckill');
  private readonly scripts: SeckillScripts;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly coupons: CouponService,
    private readonly orders: OrderRepository,
    private readonly ledger: PurchaseLedger,
    private readonly reconciler: StockReconciler,
    private readonly board: SoldOutBoard,
  ) {
    this.scripts = defineSeckillScripts(redis);
    registerSaleStepMetric();
  }

  /**
   * Sells one unit of the coupon to the user. Call it holding the coupon's
   * lock: seckill.lua alone keeps Redis right, the lock keeps Redis and the
   * database in step (no other purchase or reconciliation of this coupon
   * runs between the script and the commit), and the database's own count
   * (`sold < stock`, in the transaction that writes the order) refuses an
   * oversale whatever happened to Redis or to the lock.
   */
  async purchase(
    couponId: number,
    userId: string,
  ): Promise<{ orderId: number }> {
    const coupon = await this.coupons.findForPurchase(couponId);
    assertOnSale(coupon);
    // The coupon's lock from the decorator; none with SECKILL_LOCK=off.
    const signal = currentLock()?.signal;
    if (this.reconciler.isSuspect(couponId)) {
      await this.reconciler.reconcile(coupon);
    }
    await timeSaleStep('script', () => this.takeUnitInRedis(coupon, userId));

    let outcome: LedgerOutcome;
    try {
      outcome = await timeSaleStep('database', () =>
        this.ledger.record(
          { couponId, userId, amountPaid: coupon.price },
          signal,
        ),
      );
    } catch (error) {
      return this.settleFailedSale(coupon, userId, error, signal);
    }
    if (outcome.kind === 'sold-out') {
      // Redis sold a unit the database does not have: Redis is wrong.
      await this.repairRedis(coupon, userId);
      throw soldOut();
    }
    return { orderId: outcome.orderId };
  }

  /** Runs seckill.lua until it took a unit for the user, or throws the answer. */
  private async takeUnitInRedis(coupon: Coupon, userId: string): Promise<void> {
    let result = await this.scripts.buy(coupon.id, userId);
    if (result === BuyResult.NotLoaded) {
      // Redis lost the coupon (restarted, flushed) or never had it: load it
      // from the database under the lock we hold, then try again.
      await this.reconciler.reconcile(coupon);
      result = await this.scripts.buy(coupon.id, userId);
    }
    if (result === BuyResult.AlreadyBought) {
      const existing = await this.orders.find(coupon.id, userId);
      if (existing) throw alreadyPurchased(existing.id);
      // A ghost: Redis has a buyer without an order (a purchase that ended
      // before its commit). Answering 409 would be false: repair, then sell.
      await this.reconciler.reconcile(coupon, this.repairWait());
      result = await this.scripts.buy(coupon.id, userId);
    }
    if (result === BuyResult.SoldOut) {
      this.board.announce(coupon.id);
      throw soldOut();
    }
    if (result !== BuyResult.Bought) {
      throw unavailable(new Error(`seckill.lua answered ${String(result)}`));
    }
  }

  /**
   * The sale's transaction failed after the script took a unit. Find out
   * what the database holds, make Redis agree, then answer. The Redis side is
   * undone only when the database proves that no order exists.
   */
  private async settleFailedSale(
    coupon: Coupon,
    userId: string,
    error: unknown,
    signal: AbortSignal | undefined,
  ): Promise<{ orderId: number }> {
    if (isUniqueViolation(error)) {
      // The database already has this user's order, so Redis had lost it.
      await this.repairRedis(coupon, userId);
      const existing = await this.orders.find(coupon.id, userId);
      if (existing) throw alreadyPurchased(existing.id);
      throw unavailable(error);
    }
    const lockLost = signal?.aborted === true && error === signal.reason;
    if (lockLost || reportedByServer(error)) {
      // Rolled back for sure: the server refused a statement, or this
      // process backed out before sending COMMIT.
      await this.undo(coupon.id, userId);
      throw lockLost ? error : unavailable(error);
    }
    // No answer to the transaction: it may have committed.
    let settled: { id: number } | undefined;
    try {
      settled = await this.ledger.settledOrder(coupon.id, userId);
    } catch {
      // Still unknown: leave Redis to be rebuilt from the database by the
      // next purchase (on any instance) rather than guess.
      await this.forget(coupon.id);
      throw unavailable(error);
    }
    if (settled) return { orderId: settled.id };
    await this.undo(coupon.id, userId);
    throw unavailable(error);
  }

  /**
   * Rewrites the coupon's Redis state from the database (the reconciler logs
   * and counts the disagreement). If that fails, the user's unit is given
   * back and the coupon is rebuilt before its next purchase.
   */
  private async repairRedis(coupon: Coupon, userId: string): Promise<void> {
    try {
      await this.reconciler.reconcile(coupon, this.repairWait());
    } catch (error) {
      this.logger.warn(
        `Could not repair coupon ${coupon.id} in Redis (${(error as Error).message}); ` +
          'it is reloaded from the database before the next purchase',
      );
      this.reconciler.markSuspect(coupon.id);
      await this.undo(coupon.id, userId);
    }
  }

  /** Holding the coupon's lock a repair joins it at once; without it, it waits briefly. */
  private repairWait(): number | undefined {
    return currentLock() ? undefined : UNLOCKED_REPAIR_WAIT_MS;
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
