import { Inject, Injectable, Logger } from '@nestjs/common';
import { CouponService } from '../coupon/coupon.service.js';
import type { SaleState } from '../coupon/coupon.types.js';
import { DATABASE } from '../database/database.module.js';
import type { Db } from '../database/database.types.js';
import { LockStats, type LockSummary } from '../metrics/lock-stats.js';
import { PURCHASE_SECONDS_BUCKETS } from '../metrics/purchase-metrics.js';
import { buyerTag } from './buyer-tag.js';
import { demoModeOn } from './demo-mode.js';
import { couponLoad, type InstanceView } from './instance-figures.js';
import { InstanceRegistry } from './instance-registry.service.js';
import { InvariantWatch, type InvariantCheck } from './live-invariants.js';

const BUCKET_BOUNDS_MS = PURCHASE_SECONDS_BUCKETS.map((s) => s * 1_000);

/** Coupons in a snapshot (newest first). */
export const SNAPSHOT_COUPONS = 20;
/** Orders in a snapshot (newest first, all coupons). */
export const SNAPSHOT_ORDERS = 15;

export interface CouponSummary {
  readonly id: number;
  readonly name: string;
  readonly price: number;
  /** The initial stock. */
  readonly stock: number;
  /** Units left (Redis). */
  readonly remaining: number;
  /** Units sold (`coupons.sold`, the database's guard of the stock). */
  readonly sold: number;
  readonly saleState: SaleState;
  readonly startAt: string;
  readonly endAt: string;
}

export interface RecentOrder {
  readonly id: number;
  readonly couponId: number;
  readonly couponName: string;
  /** A short hash of the buyer's id (see buyer-tag.ts); the id itself is never sent. */
  readonly buyer: string;
  readonly amountPaid: number;
  readonly createdAt: string;
}

/** The invariants of one coupon, with the database's counts they compare (read together). */
export interface CouponInvariants extends InvariantCheck {
  /** `coupons.sold`. */
  readonly sold: number;
  /** Order rows. */
  readonly orders: number;
  /** Distinct buyers among the order rows. */
  readonly buyers: number;
}

/** By coupon id: purchases being answered now on all instances, and the cumulative time through its lock. */
export type CouponLoad = ReturnType<typeof couponLoad>;

/** What one server-sent event carries. */
export type SaleUpdate =
  | {
      readonly ok: true;
      readonly at: string;
      readonly coupons: CouponSummary[];
      readonly orders: RecentOrder[];
      /** This instance's lock figures, read from its `/metrics` registry. */
      readonly locks: LockSummary;
      /** By coupon id (the coupons of `coupons`). */
      readonly invariants: Record<string, CouponInvariants>;
      /** Every instance, from the figures each publishes to Redis. */
      readonly instances: InstanceView[];
      readonly load: CouponLoad;
      /** Upper bounds of the buckets of each instance's `buckets`, in ms. */
      readonly bucketBoundsMs: number[];
      /** Whether the demo's kill button is available (FLASH_SALE_DEMO=1). */
      readonly demo: boolean;
    }
  | { readonly ok: false; readonly at: string; readonly message: string };

/**
 * Reads one snapshot of the sale for the page: coupons, newest orders,
 * invariants, every instance's figures. Only reads; never takes a lock.
 */
@Injectable()
export class SaleSnapshots {
  private readonly logger = new Logger('SaleFeed');
  private readonly watch = new InvariantWatch();
  private lastError = '';

  constructor(
    private readonly coupons: CouponService,
    @Inject(DATABASE) private readonly db: Db,
    private readonly lockStats: LockStats,
    private readonly registry: InstanceRegistry,
  ) {}

  /** The sale now; an error update when a backend fails. */
  async read(): Promise<SaleUpdate> {
    const at = new Date().toISOString();
    try {
      const [coupons, orders, locks, instances] = await Promise.all([
        this.coupons.list(SNAPSHOT_COUPONS),
        this.recentOrders(SNAPSHOT_ORDERS),
        this.lockStats.read(),
        this.registry.read(),
      ]);
      const summaries = coupons.map((coupon): CouponSummary => ({
        id: coupon.id,
        name: coupon.name,
        price: coupon.price,
        stock: coupon.stock,
        remaining: coupon.remaining,
        sold: coupon.sold,
        saleState: coupon.saleState,
        startAt: coupon.startAt,
        endAt: coupon.endAt,
      }));
      const invariants = await this.checkInvariants(summaries);
      this.lastError = '';
      return {
        ok: true,
        at,
        coupons: summaries,
        orders,
        locks,
        invariants,
        instances,
        load: couponLoad(instances),
        bucketBoundsMs: BUCKET_BOUNDS_MS,
        demo: demoModeOn(),
      };
    } catch (error) {
      const cause = (error as Error).message ?? String(error);
      if (cause !== this.lastError) {
        this.logger.warn(`Cannot read the sale: ${cause}`);
        this.lastError = cause;
      }
      return {
        ok: false,
        at,
        message: 'Redis or the database is not answering; retrying',
      };
    }
  }

  /**
   * Compares three independent readings per coupon: `coupons.sold`, the
   * order rows (both from one statement, so one moment of the database) and
   * Redis's remaining stock (from the coupon list).
   */
  private async checkInvariants(
    coupons: readonly CouponSummary[],
  ): Promise<Record<string, CouponInvariants>> {
    const ids = coupons.map((coupon) => coupon.id);
    this.watch.keepOnly(new Set(ids));
    if (ids.length === 0) return {};
    const rows = await this.db
      .selectFrom('coupons')
      .leftJoin('orders', 'orders.couponId', 'coupons.id')
      .select((eb) => [
        'coupons.id',
        'coupons.sold',
        eb.fn.count<string>('orders.id').as('orders'),
        eb.fn.count<string>('orders.userId').distinct().as('buyers'),
      ])
      .where('coupons.id', 'in', ids)
      .groupBy(['coupons.id', 'coupons.sold'])
      .execute();
    const byCoupon = new Map(rows.map((row) => [row.id, row]));
    const now = Date.now();
    const result: Record<string, CouponInvariants> = {};
    for (const coupon of coupons) {
      const row = byCoupon.get(coupon.id);
      // A coupon deleted since the list was read: nothing left to compare.
      if (!row) continue;
      const counts = {
        sold: row.sold,
        orders: Number(row.orders),
        buyers: Number(row.buyers),
      };
      const check = this.watch.check({ ...coupon, ...counts }, now);
      result[coupon.id] = { ...check, ...counts };
    }
    return result;
  }

  private async recentOrders(limit: number): Promise<RecentOrder[]> {
    const rows = await this.db
      .selectFrom('orders')
      .innerJoin('coupons', 'coupons.id', 'orders.couponId')
      .select([
        'orders.id',
        'orders.couponId',
        'coupons.name as couponName',
        'orders.userId',
        'orders.amountPaid',
        'orders.createdAt',
      ])
      .orderBy('orders.id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(({ userId, createdAt, ...row }) => ({
      ...row,
      buyer: buyerTag(userId),
      createdAt: createdAt.toISOString(),
    }));
  }
}
