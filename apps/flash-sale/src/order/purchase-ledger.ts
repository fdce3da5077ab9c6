import { Inject, Injectable } from '@nestjs/common';
import { sql } from 'kysely';
import { DATABASE } from '../database/database.module.js';
import type { Db, NewOrder } from '../database/database.types.js';

/** What the database made of one sale. */
export type LedgerOutcome =
  | { readonly kind: 'ordered'; readonly orderId: number }
  /** The database's own count says no unit is left: nothing was written. */
  | { readonly kind: 'sold-out' };

/**
 * The database side of a sale, the last line of defence: one statement
 * takes a unit from `coupons.sold` only while `sold < stock` and inserts the
 * order, so neither a wrong Redis count nor a lost lock can oversell, and
 * UNIQUE (coupon_id, user_id) still refuses a second order.
 */
@Injectable()
export class PurchaseLedger {
  constructor(@Inject(DATABASE) private readonly db: Db) {}

  /**
   * Sells one unit and writes the order in one statement: one round trip
   * inside the coupon's lock, committed on its own. `signal` (the coupon
   * lock's) is checked once a connection is in hand, just before the
   * statement goes: a lock lost by then sells nothing and rejects with the
   * signal's reason. A lock lost while the statement runs cannot oversell
   * or sell twice either: the statement's own guard and the unique order per
   * user decide, whoever holds the lock.
   *
   * Fails with unique_violation (23505) when the user already has an order.
   */
  async record(order: NewOrder, signal?: AbortSignal): Promise<LedgerOutcome> {
    signal?.throwIfAborted();
    return this.db.connection().execute(async (connection) => {
      signal?.throwIfAborted();
      // A data-modifying CTE runs exactly once, and the statement is atomic:
      // the INSERT writes a row only when the guarded UPDATE took a unit (no
      // row back means sold out, nothing written), and a failed INSERT (the
      // user's second order) takes the UPDATE back with it.
      const { rows } = await sql<{ id: number }>`
        with taken as (
          update coupons set sold = sold + 1
          where id = ${order.couponId} and sold < stock
          returning id
        )
        insert into orders (coupon_id, user_id, amount_paid)
        select id, ${order.userId}, ${order.amountPaid} from taken
        returning id`.execute(connection);
      const [row] = rows;
      return row
        ? { kind: 'ordered', orderId: Number(row.id) }
        : { kind: 'sold-out' };
    });
  }

  /**
   * The user's order for the coupon once no sale of the coupon is still
   * deciding, for a sale whose commit had no answer (timeout, connection
   * cut). Such a sale holds the coupon's row lock from its UPDATE until its
   * COMMIT or rollback ends, so waiting for a share lock on the row first
   * makes "no order" a proof, not a guess.
   */
  async settledOrder(
    couponId: number,
    userId: string,
  ): Promise<{ id: number } | undefined> {
    return this.db.transaction().execute(async (trx) => {
      await sql`select 1 from coupons where id = ${couponId} for share`.execute(
        trx,
      );
      return trx
        .selectFrom('orders')
        .select('id')
        .where('couponId', '=', couponId)
        .where('userId', '=', userId)
        .executeTakeFirst();
    });
  }
}
