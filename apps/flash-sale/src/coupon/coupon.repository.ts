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
