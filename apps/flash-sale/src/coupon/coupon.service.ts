import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { notFound } from '../common/app-exception.js';
import { OrderRepository } from '../order/order.repository.js';
import type { OrderView } from '../order/order.types.js';
import { CouponRepository } from './coupon.repository.js';
import {
  saleState,
  toCouponView,
  type Coupon,
  type CouponDetails,
  type CouponView,
} from './coupon.types.js';
import type { CreateCouponInput } from './create-coupon.pipe.js';
import { StockCache } from './stock-cache.js';
import { StockReconciler } from './stock-reconciler.js';

@Injectable()
export class CouponService {
  /** Coupons read recently, so purchases need not ask the database each time. */
  private readonly cache = new Map<number, { coupon: Coupon; until: number }>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly coupons: CouponRepository,
    private readonly orders: OrderRepository,
    private readonly stock: StockCache,
    private readonly reconciler: StockReconciler,
  ) {}

  /** Creates the coupon and loads its stock into Redis. */
  async create(input: CreateCouponInput): Promise<CouponView> {
    const coupon = await this.coupons.create(input);
    // If this fails (503) the coupon still exists; the first purchase, or the
    // next start of any instance, loads its stock.
    await this.reconciler.reconcile(coupon);
    return toCouponView(coupon);
  }

  async list(limit: number): Promise<CouponDetails[]> {
    const coupons = await this.coupons.list(limit);
    const ids = coupons.map((coupon) => coupon.id);
    const [sold, remaining] = await Promise.all([
      this.coupons.soldByIds(ids),
      this.stock.remaining(ids),
    ]);
    return coupons.map((coupon, index) =>
      details(coupon, sold.get(coupon.id) ?? 0, remaining[index]),
    );
  }

  async get(id: number): Promise<CouponDetails> {
    const coupon = await this.require(id);
    const [sold, [remaining]] = await Promise.all([
      this.coupons.soldByIds([id]),
      this.stock.remaining([id]),
    ]);
    return details(coupon, sold.get(id) ?? 0, remaining);
  }

  async orderList(id: number, limit: number): Promise<OrderView[]> {
    await this.require(id);
    return this.orders.listByCoupon(id, limit);
  }

  /**
   * The coupon for a purchase: from memory when read within the last
   * `couponCacheTtl` ms (name, price and window do not change), else from the
   * database. Unknown ids are never cached: another instance may create them.
   */
  async findForPurchase(id: number): Promise<Coupon> {
    const now = Date.now();
    const cached = this.cache.get(id);
    if (cached && cached.until > now) return cached.coupon;
    const coupon = await this.require(id);
    if (this.config.couponCacheTtl > 0) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(id, { coupon, until: now + this.config.couponCacheTtl });
    }
    return coupon;
  }

  private async require(id: number): Promise<Coupon> {
    const coupon = await this.coupons.findById(id);
    if (!coupon) throw notFound(`Coupon ${id} does not exist`);
    return coupon;
  }
}

function details(
  coupon: Coupon,
  sold: number,
  remainingInRedis: number | undefined,
): CouponDetails {
  // Redis has the live figure for coupons on sale; for others (ended, or not
  // loaded yet) the database's is the same by construction. Neither is
  // clamped: a negative figure is a disagreement to see, not to hide.
  const remaining = remainingInRedis ?? coupon.stock - sold;
  return {
    ...toCouponView(coupon),
    remaining,
    sold,
    saleState: saleState(coupon),
    soldOut: remaining <= 0,
  };
}
