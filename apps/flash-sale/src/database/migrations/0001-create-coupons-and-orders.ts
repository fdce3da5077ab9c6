import { sql, type Kysely } from 'kysely';

/** Coupons and orders; one order per (coupon, user) is enforced by the database. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('coupons')
    .addColumn('id', 'integer', (col) =>
      col.generatedByDefaultAsIdentity().primaryKey(),
    )
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('price', 'numeric(12, 2)', (col) => col.notNull())
    .addColumn('stock', 'integer', (col) => col.notNull())
    .addColumn('start_at', 'timestamptz', (col) => col.notNull())
    .addColumn('end_at', 'timestamptz', (col) => col.notNull())
    .addColumn('status', 'text', (col) => col.notNull().defaultTo('active'))
    .addColumn('created_at', 'timestamptz', (col) =>
      col.notNull().defaultTo(sql`now()`),
    )
    .addCheckConstraint(
      'coupons_name_length',
      sql`char_length(name) between 1 and 200`,
    )
    .addCheckConstraint('coupons_price_not_negative', sql`price >= 0`)
    .addCheckConstraint('coupons_stock_range', sql`stock between 0 and 1000000`)
    .addCheckConstraint('coupons_window_order', sql`end_at > start_at`)
    .addCheckConstraint(
      'coupons_status_known',
      sql`status in ('active', 'disabled')`,
    )
    .execute();

  await db.schema
    .createTable('orders')
    .addColumn('id', 'bigint', (col) =>
      col.generatedByDefaultAsIdentity().primaryKey(),
    )
    .addColumn('coupon_id', 'integer', (col) =>
      col.notNull().references('coupons.id'),
    )
    .addColumn('user_id', 'text', (col) => col.notNull())
    .addColumn('amount_paid', 'numeric(12, 2)', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) =>
      col.notNull().defaultTo(sql`now()`),
    )
    .addUniqueConstraint('orders_coupon_user_unique', ['coupon_id', 'user_id'])
    .addCheckConstraint(
      'orders_user_id_length',
      sql`char_length(user_id) between 1 and 64`,
    )
    .execute();

  // Newest orders of a coupon first.
  await db.schema
    .createIndex('orders_coupon_newest')
    .on('orders')
    .columns(['coupon_id', 'created_at desc', 'id desc'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('orders').execute();
  await db.schema.dropTable('coupons').execute();
}
