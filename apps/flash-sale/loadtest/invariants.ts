import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';

/** A success a client saw: 201 with this order id, for this user. */
export interface ClientSuccess {
  readonly userId: string;
  /** Undefined when the 201 had no `orderId` (counts as a broken invariant). */
  readonly orderId?: number;
}

export interface Invariant {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

/** What the database and Redis hold for the coupon after the run. */
export interface SaleState {
  readonly initialStock: number;
  /** `seckill:{coupon:<id>}:stock` in Redis; null when it is missing. */
  readonly remainingInRedis: number | null;
  /** Members of `seckill:{coupon:<id>}:buyers` in Redis. */
  readonly buyersInRedis: number;
  readonly ordersInDatabase: number;
  readonly distinctUsersInDatabase: number;
  /** Users with more than one order for the coupon (at most 10 listed). */
  readonly usersWithTwoOrders: string[];
}

export interface InvariantCheck {
  readonly state: SaleState;
  readonly invariants: Invariant[];
  /** Client successes whose order id and user are not an order of the coupon in the database. */
  readonly missingSuccesses: number;
}

/**
 * Reads the database and Redis directly and checks the invariants:
 * orders = initial stock - remaining stock, no user with two orders for the
 * coupon, no more orders than stock, and each success a client saw (order id
 * and user) is an order of the coupon in the database.
 *
 * Waits first until the coupon's state stops changing (a purchase whose
 * client gave up may still be finishing on the server), for at most
 * `settleMs`.
 */
export async function checkInvariants(options: {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  readonly couponId: number;
  readonly successes: readonly ClientSuccess[];
  readonly settleMs?: number;
}): Promise<InvariantCheck> {
  const { couponId } = options;
  const client = new pg.Client({
    connectionString: options.databaseUrl,
    connectionTimeoutMillis: 10_000,
    query_timeout: 30_000,
  });
  client.on('error', () => undefined);
  const redis = new Redis(options.redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 2,
    connectTimeout: 5_000,
    commandTimeout: 10_000,
  });
  redis.on('error', () => undefined);
  try {
    await Promise.all([client.connect(), redis.connect()]);
    const fingerprint = async () => {
      const [[stock, buyers], count] = await Promise.all([
        redis
          .multi()
          .get(stockKey(couponId))
          .scard(buyersKey(couponId))
          .exec()
          .then((results) => (results ?? []).map(([, value]) => value)),
        client.query<{ n: string }>(
          'select count(*) as n from orders where coupon_id = $1',
          [couponId],
        ),
      ]);
      return `${String(stock)}/${String(buyers)}/${count.rows[0].n}`;
    };
    const deadline = Date.now() + (options.settleMs ?? 15_000);
    let previous = await fingerprint();
    for (;;) {
      await sleep(300);
      const current = await fingerprint();
      if (current === previous || Date.now() > deadline) break;
      previous = current;
    }

    const coupon = await client.query<{ stock: number }>(
      'select stock from coupons where id = $1',
      [couponId],
    );
    if (coupon.rows.length === 0)
      throw new Error(`Coupon ${couponId} is not in the database`);
    const initialStock = Number(coupon.rows[0].stock);
    const orders = await client.query<{ id: string; user_id: string }>(
      'select id, user_id from orders where coupon_id = $1',
      [couponId],
    );
    const [remaining, buyersInRedis] = await Promise.all([
      redis.get(stockKey(couponId)),
      redis.scard(buyersKey(couponId)),
    ]);

    const userById = new Map<number, string>();
    const ordersPerUser = new Map<string, number>();
    for (const row of orders.rows) {
      userById.set(Number(row.id), row.user_id);
      ordersPerUser.set(row.user_id, (ordersPerUser.get(row.user_id) ?? 0) + 1);
    }
    const usersWithTwoOrders = [...ordersPerUser]
      .filter(([, n]) => n > 1)
      .map(([user]) => user);
    const state: SaleState = {
      initialStock,
      remainingInRedis: remaining === null ? null : Number(remaining),
      buyersInRedis,
      ordersInDatabase: orders.rows.length,
      distinctUsersInDatabase: ordersPerUser.size,
      usersWithTwoOrders: usersWithTwoOrders.slice(0, 10),
    };

    const missing = options.successes.filter(
      ({ orderId, userId }) =>
        orderId === undefined || userById.get(orderId) !== userId,
    );
    const withoutId = options.successes.filter(
      (s) => s.orderId === undefined,
    ).length;

    const invariants: Invariant[] = [
      state.remainingInRedis === null
        ? {
            name: 'orders = initial stock - remaining',
            ok: false,
            detail: `the remaining stock is not in Redis (${stockKey(couponId)} missing)`,
          }
        : {
            name: 'orders = initial stock - remaining',
            ok:
              state.ordersInDatabase === initialStock - state.remainingInRedis,
            detail: `${state.ordersInDatabase} orders, ${initialStock} - ${state.remainingInRedis} = ${initialStock - state.remainingInRedis}`,
          },
      {
        name: 'no user has two orders for the coupon',
        ok: usersWithTwoOrders.length === 0,
        detail:
          usersWithTwoOrders.length === 0
            ? `${state.distinctUsersInDatabase} users, one order each`
            : `${usersWithTwoOrders.length} users with more than one order, e.g. ${usersWithTwoOrders.slice(0, 3).join(', ')}`,
      },
      {
        name: 'no more orders than stock',
        ok: state.ordersInDatabase <= initialStock,
        detail: `${state.ordersInDatabase} orders <= stock ${initialStock}`,
      },
      {
        name: 'every 201 has its order in the database',
        ok: missing.length === 0,
        detail:
          missing.length === 0
            ? `${options.successes.length} of ${options.successes.length} (order id, user) pairs found`
            : `${missing.length} of ${options.successes.length} missing` +
              (withoutId > 0 ? ` (${withoutId} without an orderId)` : '') +
              `, e.g. ${missing
                .slice(0, 3)
                .map((s) => `#${s.orderId ?? '?'} ${s.userId}`)
                .join(', ')}`,
      },
    ];
    return { state, invariants, missingSuccesses: missing.length };
  } finally {
    redis.disconnect();
    await client.end().catch(() => undefined);
  }
}
