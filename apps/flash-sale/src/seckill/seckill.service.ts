import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { CouponService } from '../coupon/coupon.service.js';
import { BatchSale } from './batch-sale.js';
import { PendingPurchase, type PurchaseAnswer } from './pending-purchase.js';
import { PurchaseQueue } from './purchase-queue.js';
import { assertOnSale } from './sale-window.js';

/**
 * A purchase: one unit of a coupon for a user, once. With the lock (the
 * default) it queues for the coupon's next turn of the lock on this instance
 * and is sold in that turn's batch; with SECKILL_LOCK=off (load tests only)
 * it is sold at once, on its own, beside any other purchase.
 */
@Injectable()
export class SeckillService {
  constructor(
    private readonly coupons: CouponService,
    private readonly sale: BatchSale,
    private readonly queue: PurchaseQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async purchase(couponId: number, userId: string): Promise<PurchaseAnswer> {
    const coupon = await this.coupons.findForPurchase(couponId);
    assertOnSale(coupon);
    if (this.config.seckill.lock) return this.queue.buy(couponId, userId);
    const purchase = new PendingPurchase(userId);
    await this.sale.sell(coupon, [purchase]);
    return purchase.answer;
  }
}
