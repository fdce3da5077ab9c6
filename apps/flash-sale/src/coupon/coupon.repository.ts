import { Inject, Injectable } from '@nestjs/common';
import { DATABASE } from '../database/database.module.js';
import type { Db, NewCoupon } from '../database/database.types.js';
import type { Coupon } from './coupon.types.js';

const COLUMNS = [
  'id',
  'name',
  'price',
  'stock',
  'startAt',
  'endAt',
  'status',
] as const;

@Injectable()
export class CouponRepository {
  constructor(@Inject(DATABASE) private readonly db: Db) {}

  create(coupon: NewCoupon): Promise<Coupon> {
    return this.db
      .insertInto('coupons')
      .values(coupon)
      .returning(COLUMNS)
      .executeTakeFirstOrThrow();
  }

  findById(id: number): Promise<Coupon | undefined> {
    return this.db
      .selectFrom('coupons')
      .select(COLUMNS)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** Newest first. */
  list(limit: number): Promise<Coupon[]> {
    return this.db
      .selectFrom('coupons')
      .select(COLUMNS)
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  }

  /** `coupons.sold` of the given coupons (absent ids are left out). */
  async soldByIds(ids: number[]): Promise<Map<number, number>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('coupons')
      .select(['id', 'sold'])
      .where('id', 'in', ids)
      .execute();
    return new Map(rows.map((row) => [row.id, row.sold]));
  }

  /**
   * The database's figures for the coupon, read together: its stock, its
   * `sold` column and its orders counted. The last two agree unless an order
   * was written (or removed) around the purchase transaction.
   */
  async saleCounts(
    id: number,
  ): Promise<{ stock: number; sold: number; orders: number } | undefined> {
    const row = await this.db
      .selectFrom('coupons')
      .select((eb) => [
        'stock',
        'sold',
        eb
          .selectFrom('orders')
          .select(eb.fn.countAll<number>().as('count'))
          .whereRef('orders.couponId', '=', 'coupons.id')
          .as('orders'),
      ])
      .where('id', '=', id)
      .executeTakeFirst();
    return (
      row && { stock: row.stock, sold: row.sold, orders: Number(row.orders) }
    );
  }

  /** Sets `sold` to the orders counted (fails with check_violation past the stock). */
  async setSold(id: number, sold: number): Promise<void> {
    await this.db
      .updateTable('coupons')
      .set({ sold })
      .where('id', '=', id)
      .execute();
  }

  /** Active coupons whose sale has not ended: the ones whose stock belongs in Redis. */
  listSellable(now: Date): Promise<Coupon[]> {
    return this.db
      .selectFrom('coupons')
      .select(COLUMNS)
      .where('status', '=', 'active')
      .where('endAt', '>', now)
      .orderBy('id')
      .execute();
  }
}
