import { Injectable, type PipeTransform } from '@nestjs/common';
import { CouponService } from '../coupon/coupon.service.js';
import { assertOnSale } from './sale-window.js';

/**
 * Rejects unknown coupons (404) and coupons outside their sale window (409)
 * before the purchase queues for the coupon's lock. The service checks again
 * under the lock.
 */
@Injectable()
export class CouponOnSalePipe implements PipeTransform<
  number,
  Promise<number>
> {
  constructor(private readonly coupons: CouponService) {}

  async transform(couponId: number): Promise<number> {
    assertOnSale(await this.coupons.findForPurchase(couponId));
    return couponId;
  }
}
