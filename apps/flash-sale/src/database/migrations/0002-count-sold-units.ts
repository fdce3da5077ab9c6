import { sql, type Kysely } from 'kysely';

/**
 * `coupons.sold`: the units sold, kept by the purchase transaction itself
 * (`sold = sold + 1 where sold < stock`, with the order insert), so that the
 * database refuses a sale beyond the stock whatever Redis or the lock say.
 * Backfilled from the orders written before it existed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('coupons')
    .addColumn('sold', 'integer', (col) => col.notNull().defaultTo(0))
    .execute();
  await sql`
    update coupons
       set sold = (select count(*) from orders where orders.coupon_id = coupons.id)
  `.execute(db);
  await db.schema
    .alterTable('coupons')
    .addCheckConstraint(
      'coupons_sold_within_stock',
      sql`sold between 0 and stock`,
    )
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('coupons').dropColumn('sold').execute();
}
