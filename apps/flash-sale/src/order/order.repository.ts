import { Inject, Injectable } from '@nestjs/common';
import { DATABASE } from '../database/database.module.js';
import type { Db, NewOrder } from '../database/database.types.js';
import { buyerTag } from '../web/buyer-tag.js';
import type { OrderView } from './order.types.js';

@Injectable()
export class OrderRepository {
  constructor(@Inject(DATABASE) private readonly db: Db) {}

  /** Fails with unique_violation (23505) when the user already has an order for the coupon. */
  async insert(order: NewOrder): Promise<{ id: number }> {
    return this.db
      .insertInto('orders')
      .values(order)
      .returning('id')
      .executeTakeFirstOrThrow();
  }

  /** The user's order for the coupon, if any. */
  find(couponId: number, userId: string): Promise<{ id: number } | undefined> {
    return this.db
      .selectFrom('orders')
      .select('id')
      .where('couponId', '=', couponId)
      .where('userId', '=', userId)
      .executeTakeFirst();
  }

  /** The coupon's newest orders first, each buyer shown as its tag. */
  async listByCoupon(couponId: number, limit: number): Promise<OrderView[]> {
    const rows = await this.db
      .selectFrom('orders')
      .select(['id', 'couponId', 'userId', 'amountPaid', 'createdAt'])
      .where('couponId', '=', couponId)
      .orderBy('createdAt', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(({ userId, createdAt, ...row }) => ({
      ...row,
      buyer: buyerTag(userId),
      createdAt: createdAt.toISOString(),
    }));
  }

  /** Every buyer of the coupon, in pages of `pageSize` (keyset pagination by order id). */
  async *buyers(couponId: number, pageSize = 5_000): AsyncGenerator<string[]> {
    let after = 0;
    for (;;) {
      const rows = await this.db
        .selectFrom('orders')
        .select(['id', 'userId'])
        .where('couponId', '=', couponId)
        .where('id', '>', after)
        .orderBy('id')
        .limit(pageSize)
        .execute();
      if (rows.length === 0) return;
      yield rows.map((row) => row.userId);
      if (rows.length < pageSize) return;
      after = rows[rows.length - 1].id;
    }
  }
}
