import { Injectable, Logger } from '@nestjs/common';
import { LockService, currentLock, encodeKeyPart } from '@app/distributed-lock';
import {
  countStockRepair,
  registerStockRepairMetric,
} from '../metrics/stock-repairs.js';
import { OrderRepository } from '../order/order.repository.js';
import { CouponRepository } from './coupon.repository.js';
import type { Coupon } from './coupon.types.js';
import { StockCache } from './stock-cache.js';

/** The lock a purchase of the coupon holds (`@DistributedLock('coupon:<0>')` builds the same key). */
export function couponLockKey(couponId: number): string {
  return `coupon:${encodeKeyPart(couponId)}`;
}

/** A coupon's stock as the database has it, after a reconciliation. */
export interface StockState {
  readonly remaining: number;
  readonly sold: number;
}

/** How long `reconcile` waits for the coupon's lock by default (creation, purchases). */
const RECONCILE_WAIT_MS = 30_000;

/**
 * Makes Redis and `coupons.sold` agree with the coupon's orders, the source
 * of truth: remaining stock = stock - orders, buyers = the users with an
 * order, sold = orders. Every disagreement found is logged and counted in
 * `flash_sale_stock_repairs_total{side}` before it is repaired; nothing is
 * clamped. Runs holding the coupon's lock, the one purchases hold, so it
 * never races with a purchase on any instance (unless SECKILL_LOCK=off).
 */
@Injectable()
export class StockReconciler {
  private readonly logger = new Logger('StockReconciler');
  private readonly suspect = new Set<number>();

  constructor(
    private readonly coupons: CouponRepository,
    private readonly orders: OrderRepository,
    private readonly cache: StockCache,
    private readonly locks: LockService,
  ) {
    registerStockRepairMetric();
  }

  /**
   * Rebuilds the coupon's Redis state from the database under its lock
   * (reentrant: a purchase that already holds it just continues), waiting
   * for the lock up to `waitTime` ms.
   */
  reconcile(coupon: Coupon, waitTime = RECONCILE_WAIT_MS): Promise<StockState> {
    return this.locks.using(
      couponLockKey(coupon.id),
      () => this.repair(coupon, true),
      { waitTime },
    );
  }

  /**
   * Compares the coupon's Redis state and `sold` with its orders and repairs
   * what differs, if its lock is free within `waitTime` ms. Resolves null
   * when it was busy (a purchase is running: nothing was checked).
   */
  async check(coupon: Coupon, waitTime: number): Promise<StockState | null> {
    const lock = await this.locks.tryAcquire(couponLockKey(coupon.id), {
      waitTime,
    });
    if (!lock) return null;
    try {
      return await lock.run(() => this.repair(coupon, false));
    } finally {
      await lock.release();
    }
  }

  /** Remembers that Redis may disagree with the database for this coupon (an undo failed). */
  markSuspect(couponId: number): void {
    this.suspect.add(couponId);
  }

  isSuspect(couponId: number): boolean {
    return this.suspect.has(couponId);
  }

  /** Call holding the coupon's lock. `rebuild`: rewrite Redis even when the counts agree. */
  private async repair(coupon: Coupon, rebuild: boolean): Promise<StockState> {
    const counts = await this.coupons.saleCounts(coupon.id);
    if (!counts) throw new Error(`Coupon ${coupon.id} is not in the database`);
    if (counts.sold !== counts.orders) await this.repairSold(coupon.id, counts);

    const remaining = counts.stock - counts.orders;
    const cached = await this.cache.snapshot(coupon.id);
    const loaded = cached.remaining !== undefined;
    const sameCounts =
      cached.remaining === remaining && cached.buyers === counts.orders;
    if (loaded && !sameCounts) {
      countStockRepair('redis');
      this.logger.warn(
        `Coupon ${coupon.id}: Redis had ${cached.remaining} left and ${cached.buyers} buyer(s), ` +
          `the database ${remaining} left and ${counts.orders} order(s); Redis rewritten from the orders`,
      );
    }
    // Equal counts can still hide a buyer lost and a ghost added: compare the
    // buyers themselves. The set has as many members as there are (distinct)
    // buyers with an order, so none missing means the two sets are equal.
    const lost =
      loaded && sameCounts ? await this.buyersMissingFromRedis(coupon.id) : 0;
    if (lost > 0) {
      countStockRepair('redis');
      this.logger.warn(
        `Coupon ${coupon.id}: Redis had the database's counts (${remaining} left, ${counts.orders} buyer(s)) ` +
          `but lacked ${lost} buyer(s) with an order and held as many without one; Redis rewritten from the orders`,
      );
    }
    const differs = loaded && (!sameCounts || lost > 0);
    if (rebuild || differs || !loaded) {
      // A lock lost by now may let a purchase run beside this rewrite.
      currentLock()?.signal.throwIfAborted();
      await this.cache.replace(
        coupon.id,
        remaining,
        this.orders.buyers(coupon.id),
      );
    }
    this.suspect.delete(coupon.id);
    return { remaining, sold: counts.orders };
  }

  /** Buyers with an order that Redis does not record, read a page of orders at a time. */
  private async buyersMissingFromRedis(couponId: number): Promise<number> {
    let missing = 0;
    for await (const page of this.orders.buyers(couponId)) {
      // A long comparison stops once the lock is lost: purchases may run again.
      currentLock()?.signal.throwIfAborted();
      missing += await this.cache.countMissingBuyers(couponId, page);
    }
    return missing;
  }

  /** `sold` disagrees with the orders (written around the purchase transaction). */
  private async repairSold(
    couponId: number,
    counts: { stock: number; sold: number; orders: number },
  ): Promise<void> {
    countStockRepair('database');
    if (counts.orders > counts.stock) {
      // The CHECK keeps `sold` within the stock: the excess stays visible
      // (the orders, and a negative remaining in Redis) for a person to settle.
      this.logger.error(
        `Coupon ${couponId} has ${counts.orders} orders for a stock of ${counts.stock}; ` +
          `coupons.sold stays at ${counts.sold}`,
      );
      return;
    }
    this.logger.warn(
      `Coupon ${couponId}: coupons.sold was ${counts.sold}, the orders are ${counts.orders}; sold set to ${counts.orders}`,
    );
    await this.coupons.setSold(couponId, counts.orders);
  }
}
