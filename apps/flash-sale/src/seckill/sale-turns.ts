import { Inject, Injectable } from '@nestjs/common';
import { DistributedLock } from '@app/distributed-lock';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { CouponService } from '../coupon/coupon.service.js';
import { BatchSale } from './batch-sale.js';
import type { CouponQueue } from './coupon-queue.js';
import { SoldOutBoard } from './sold-out-board.js';

/**
 * A turn of a coupon's lock: one instance at a time, across all of them,
 * sells a batch of the purchases queued on it for the coupon.
 */
@Injectable()
export class SaleTurns {
  constructor(
    private readonly coupons: CouponService,
    private readonly sale: BatchSale,
    private readonly board: SoldOutBoard,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Takes the coupon's lock, then sells the next batch of `queue`. The wait
   * for the lock (the module's `waitTime`, SECKILL_WAIT_MS) stops when the
   * coupon sells out, on any instance, or when no purchase is left waiting.
   */
  @DistributedLock('coupon:<0>', {
    signal(this: SaleTurns, couponId: number, queue: CouponQueue) {
      return queue.turnSignal(this.board.signalFor(couponId));
    },
  })
  async sellNext(couponId: number, queue: CouponQueue): Promise<void> {
    queue.endTurn();
    const batch = queue.take(this.config.seckill.batchMax);
    if (batch.length === 0) return;
    try {
      const coupon = await this.coupons.findForPurchase(couponId);
      await this.sale.sell(coupon, batch);
    } catch (error) {
      // The coupon could not be read (the database is down): 503 for the batch.
      for (const purchase of batch) purchase.fail(error);
    } finally {
      // Whatever escaped the sale: no purchase of the batch is left unanswered.
      const escaped = new Error('The sale ended without an answer');
      for (const purchase of batch) purchase.fail(escaped);
    }
  }
}
