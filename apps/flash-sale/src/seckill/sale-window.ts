import { notOnSale } from '../common/app-exception.js';
import { saleState, type Coupon } from '../coupon/coupon.types.js';

/** 409 NOT_ON_SALE outside the coupon's sale window, or when it is disabled. */
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
