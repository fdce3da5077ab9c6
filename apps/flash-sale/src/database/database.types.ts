import type pg from 'pg';
import type {
  ColumnType,
  Generated,
  Insertable,
  Kysely,
  Selectable,
} from 'kysely';

/** A coupon's lifecycle flag; a disabled coupon is not sold whatever its window. */
export type CouponStatus = 'active' | 'disabled';

/** Table `coupons` (columns in snake_case in SQL, camelCase here). */
export interface CouponTable {
  id: Generated<number>;
  name: string;
  /** numeric(12,2), parsed to a number. */
  price: number;
  /** The initial stock; what is left is `stock - sold`. */
  stock: number;
  /**
   * Units sold: raised with each order insert in one transaction, never past
   * `stock` (CHECK), and equal to the coupon's orders.
   */
  sold: ColumnType<number, number | undefined, number>;
  startAt: Date;
  endAt: Date;
  status: ColumnType<CouponStatus, CouponStatus | undefined, CouponStatus>;
  createdAt: ColumnType<Date, Date | undefined, never>;
}

/** Table `orders`: UNIQUE (coupon_id, user_id) is the last line of defence. */
export interface OrderTable {
  /** bigint, parsed to a number. */
  id: Generated<number>;
  couponId: number;
  userId: string;
  amountPaid: number;
  createdAt: ColumnType<Date, Date | undefined, never>;
}

export interface Database {
  coupons: CouponTable;
  orders: OrderTable;
}

export type Db = Kysely<Database>;
export type CouponRow = Selectable<CouponTable>;
export type NewCoupon = Insertable<CouponTable>;
export type OrderRow = Selectable<OrderTable>;
export type NewOrder = Insertable<OrderTable>;

/** The `pg` pool behind {@link Db}: the sale uses it to know which server session ran its statement. */
export type DbPool = pg.Pool;
