import type { CouponRow, CouponStatus } from '../database/database.types.js';

/** A coupon's fixed fields (`sold` changes with every sale: read it where needed). */
export type Coupon = Omit<CouponRow, 'createdAt' | 'sold'>;

/** Where a coupon stands: `on_sale` is the only state in which it can be bought. */
export type SaleState = 'upcoming' | 'on_sale' | 'ended' | 'disabled';

/** A coupon as the API shows it. */
export interface CouponView {
  readonly id: number;
  readonly name: string;
  readonly price: number;
  /** The initial stock. */
  readonly stock: number;
  readonly startAt: string;
  readonly endAt: string;
  readonly status: CouponStatus;
}

/** A coupon with its live counts: `remaining` from Redis, `sold` from the database (`coupons.sold`). */
export interface CouponDetails extends CouponView {
  readonly remaining: number;
  readonly sold: number;
  readonly saleState: SaleState;
  readonly soldOut: boolean;
}

/** The state of `coupon`'s sale window at `now`. */
export function saleState(coupon: Coupon, now = new Date()): SaleState {
  if (coupon.status !== 'active') return 'disabled';
  if (now < coupon.startAt) return 'upcoming';
  if (now >= coupon.endAt) return 'ended';
  return 'on_sale';
}

export function toCouponView(coupon: Coupon): CouponView {
  return {
    id: coupon.id,
    name: coupon.name,
    price: coupon.price,
    stock: coupon.stock,
    startAt: coupon.startAt.toISOString(),
    endAt: coupon.endAt.toISOString(),
    status: coupon.status,
  };
}
