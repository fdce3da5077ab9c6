import {
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { LockService, encodeKeyPart } from '@app/distributed-lock';
import { OrderRepository } from '../order/order.repository.js';
import { CouponRepository } from './coupon.repository.js';
import type { Coupon } from './coupon.types.js';
import { StockCache } from './stock-cache.js';

/** The lock a purchase of the coupon holds (`@DistributedLock('coupon:<0>')` builds the same key). */
export function couponLockKey(couponId: number): string {
  return `coupon:${encodeKeyPart(couponId)}`;
}

/**
 * Makes Redis agree with the database, the source of truth: remaining stock =
 * stock - orders, buyers = the users with an order. Runs for every coupon
 * that is or will be on sale when the app starts (so a restart, even after
 * Redis lost its data, neither resells nor lets a user buy twice), when a
 * coupon is created, and when a purchase finds Redis without the coupon or a
 * failed undo left it off by one.
 *
 * Each run holds the coupon's lock, the same one purchases hold, so an
 * instance that starts during a sale never races with purchases on the others.
 */
@Injectable()
export class StockReconciler implements OnApplicationBootstrap {
  private readonly logger = new Logger('StockReconciler');
  private readonly suspect = new Set<number>();

  constructor(
    private readonly coupons: CouponRepository,
    private readonly orders: OrderRepository,
    private readonly cache: StockCache,
    private readonly locks: LockService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const sellable = await this.coupons.listSellable(new Date());
    for (const coupon of sellable) await this.reconcile(coupon);
    if (sellable.length > 0) {
      this.logger.log(
        `Loaded the stock and buyers of ${sellable.length} coupon(s) from the database into Redis`,
      );
    }
  }

  /**
   * Rebuilds the coupon's Redis state from the database under its lock
   * (reentrant: a purchase that already holds it just continues).
   */
  reconcile(coupon: Coupon): Promise<{ remaining: number; sold: number }> {
    return this.locks.using(
      couponLockKey(coupon.id),
      async () => {
        const result = await this.cache.replace(
          coupon.id,
          coupon.stock,
          this.orders.buyers(coupon.id),
        );
        this.suspect.delete(coupon.id);
        return result;
      },
      { waitTime: 30_000 },
    );
  }

  /** Remembers that Redis may disagree with the database for this coupon (an undo failed). */
  markSuspect(couponId: number): void {
    this.suspect.add(couponId);
  }

  isSuspect(couponId: number): boolean {
    return this.suspect.has(couponId);
  }
}
