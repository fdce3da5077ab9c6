import { Inject, Injectable } from '@nestjs/common';
import pg from 'pg';
import { DATABASE_POOL } from '../database/database.module.js';
import type { DbPool } from '../database/database.types.js';
import { SaleNotSent, SaleOutcomeUnknown } from './sale-errors.js';
import { waitForSessionEnd } from './session-end.js';

/** What the database made of a batch of sales. */
export type LedgerOutcome =
  /**
   * Each user of the batch that got an order, with its id. A user of the
   * batch missing here had an order for the coupon already: nothing was
   * written for them and no unit was taken for them.
   */
  | { readonly kind: 'ordered'; readonly orders: ReadonlyMap<string, number> }
  /** The database's own count has fewer units left than the batch asked for: nothing was written. */
  | { readonly kind: 'over-stock' };

/** The CHECK that keeps `coupons.sold` within the stock (migration 0002). */
const SOLD_WITHIN_STOCK = 'coupons_sold_within_stock';
const CHECK_VIOLATION = '23514';

// One statement, so atomic and committed on its own: the INSERT writes an
// order for each user who has none (UNIQUE (coupon_id, user_id) with ON
// CONFLICT DO NOTHING), and the UPDATE adds exactly the rows it wrote to
// `sold` (a data-modifying CTE runs once, and reads the INSERT's RETURNING).
// Past the stock, the CHECK on `sold` fails the statement, INSERT included:
// neither a wrong Redis count nor a lost lock can oversell.
const SELL = `
  with ordered as (
    insert into orders (coupon_id, user_id, amount_paid)
    select $1, buyer, $3 from unnest($2::text[]) as buyer
    on conflict (coupon_id, user_id) do nothing
    returning id, user_id
  ), taken as (
    update coupons set sold = sold + (select count(*) from ordered)
    where id = $1
    returning sold
  )
  select ordered.id, ordered.user_id, (select sold from taken) as sold
  from ordered`;

const ORDERS_OF = `
  select id, user_id from orders
  where coupon_id = $1 and user_id = any($2::text[])`;

/**
 * The database side of a sale, the last line of defence: one statement per
 * batch of buyers takes their units from `coupons.sold` and writes their
 * orders, and the database refuses it when the stock would be exceeded.
 *
 * It runs on a connection of the pool taken by hand, so that it knows which
 * server session ran the statement: when no answer comes, {@link settle}
 * ends that session before it reads what was written, so that a statement
 * still on its way cannot commit after the answer was given.
 */
@Injectable()
export class PurchaseLedger {
  constructor(@Inject(DATABASE_POOL) private readonly pool: DbPool) {}

  /**
   * Sells one unit to each of `users` (distinct) and writes their orders.
   * `signal` (the coupon lock's) is checked once a connection is in hand,
   * just before the statement goes: a lock lost by then sells nothing.
   *
   * Rejects with {@link SaleNotSent} when nothing reached the server, with
   * the server's `pg.DatabaseError` when it refused the statement (nothing
   * written), and with {@link SaleOutcomeUnknown} when the statement was sent
   * and no answer came.
   */
  async record(
    couponId: number,
    users: readonly string[],
    amountPaid: number,
    signal?: AbortSignal,
  ): Promise<LedgerOutcome> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw new SaleNotSent('No database connection for the sale', error);
    }
    let broken: Error | undefined;
    try {
      if (signal?.aborted)
        throw new SaleNotSent('The coupon lock was lost', signal.reason);
      const { rows } = await client
        .query<{ id: number; user_id: string }>(SELL, [
          couponId,
          users,
          amountPaid,
        ])
        .catch((error: unknown) => {
          if (!(error instanceof pg.DatabaseError)) {
            // Sent, and no answer: the connection is not to be used again.
            broken = error as Error;
            throw new SaleOutcomeUnknown(sessionOf(client), error);
          }
          throw error;
        });
      return {
        kind: 'ordered',
        orders: new Map(rows.map((row) => [row.user_id, Number(row.id)])),
      };
    } catch (error) {
      if (
        error instanceof pg.DatabaseError &&
        error.code === CHECK_VIOLATION &&
        error.constraint === SOLD_WITHIN_STOCK
      ) {
        return { kind: 'over-stock' };
      }
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** The orders the given users have for the coupon, by user. */
  async ordersOf(
    couponId: number,
    users: readonly string[],
  ): Promise<Map<string, number>> {
    if (users.length === 0) return new Map();
    const { rows } = await this.pool.query<{ id: number; user_id: string }>(
      ORDERS_OF,
      [couponId, users],
    );
    return new Map(rows.map((row) => [row.user_id, Number(row.id)]));
  }

  /**
   * The orders `users` have for the coupon, read once the server session
   * `session` (that of a {@link SaleOutcomeUnknown}) can commit nothing more:
   * it is terminated and gone first, so "no order" is final.
   *
   * On a server whose connections share one session (the embedded PGlite,
   * which runs every connection's statements in turn, in arrival order) it
   * cannot be terminated; the orders are read after whatever reached the
   * server before, and a statement still on its way is not ruled out.
   */
  async settle(
    couponId: number,
    users: readonly string[],
    session: number | undefined,
  ): Promise<Map<string, number>> {
    if (session === undefined)
      throw new Error('The server session of the sale is not known');
    const client = await this.pool.connect();
    try {
      await waitForSessionEnd(client, session);
      const { rows } = await client.query<{ id: number; user_id: string }>(
        ORDERS_OF,
        [couponId, users],
      );
      return new Map(rows.map((row) => [row.user_id, Number(row.id)]));
    } finally {
      client.release();
    }
  }
}

/** The server session (backend process id) of a connection, from its start-up. */
function sessionOf(client: pg.PoolClient): number | undefined {
  const id = (client as { processID?: unknown }).processID;
  return typeof id === 'number' && id > 0 ? id : undefined;
}
