import type { Cluster, Redis } from 'ioredis';
import { LockService, RedisLockBackend } from '@app/distributed-lock';
import { couponLockKey } from '../../src/coupon/stock-reconciler.js';
import { buyersKey, stockKey } from '../../src/coupon/stock-cache.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  createTestDatabase,
  sleep,
  startApp,
  type TestApp,
  type TestDatabase,
} from './harness.js';

/**
 * Setup and checks shared by the e2e tests on Redis Cluster and Sentinel: the
 * app booted on the deployment, a flash sale under contention, and the coupon
 * lock living where the app's config says.
 */

/** How {@link useAppOnRedisDeployment} starts a Redis deployment and points the app at it. */
export interface RedisDeploymentSetup<
  D extends { stop(): Promise<void> },
  C extends Redis | Cluster,
> {
  start(): Promise<D>;
  /** A client of the test's own on `deployment`, to look at the keys. */
  client(deployment: D): C;
  /** The app's Redis settings for `deployment`, as environment variables. */
  env(deployment: D): NodeJS.ProcessEnv;
}

/** The live handles of {@link useAppOnRedisDeployment}, set once its `beforeAll` ran. */
export interface AppOnRedisDeployment<D, C> {
  deployment: D;
  db: TestDatabase;
  app: TestApp;
  /** The test's own client, from {@link RedisDeploymentSetup.client}. */
  redis: C;
}

/**
 * Starts the Redis deployment and a test database side by side before the
 * file's tests, then the test's own client and the app, configured by the
 * environment alone (as in production); closes them all after. Call it first
 * in a `describe`.
 */
export function useAppOnRedisDeployment<
  D extends { stop(): Promise<void> },
  C extends Redis | Cluster,
>(
  admin: string,
  setup: RedisDeploymentSetup<D, C>,
): AppOnRedisDeployment<D, C> {
  const handles = {} as AppOnRedisDeployment<D, C>;
  beforeAll(async () => {
    const [deployment, db] = await Promise.all([
      setup.start(),
      createTestDatabase(admin),
    ]);
    Object.assign(handles, { deployment, db });
    handles.redis = setup.client(deployment);
    handles.app = await startApp(
      {},
      {
        ...setup.env(deployment),
        DATABASE_URL: db.url,
        SECKILL_WAIT_MS: '20000',
      },
    );
  });
  afterAll(async () => {
    await handles.app?.close();
    handles.redis?.disconnect();
    await handles.db?.drop();
    await handles.deployment?.stop();
  });
  return handles;
}

export interface ContendedSaleOptions {
  readonly stock: number;
  /** Distinct buyers, more than `stock`. */
  readonly users: number;
  /** How many of them send a second purchase in the same burst. */
  readonly repeaters: number;
}

/**
 * Creates a coupon with `stock` units, fires every purchase at once (each
 * user once, the first `repeaters` users twice) and checks: exactly `stock`
 * successes, to distinct users, every other answer a 409 SOLD_OUT or
 * ALREADY_PURCHASED; the database has one order per success (same ids) and
 * stock - orders = the remaining stock in Redis = 0; the buyers in Redis are
 * the users with an order. `redis` reads the coupon's keys directly.
 */
export async function sellUnderContention(
  app: TestApp,
  db: TestDatabase,
  redis: Redis | Cluster,
  options: ContendedSaleOptions,
): Promise<{ couponId: number; winners: string[] }> {
  const { stock, users, repeaters } = options;
  const couponId = await createCoupon(app.http, { stock });
  const buyers = Array.from({ length: users }, (_, i) => `buyer-${i}`);
  const attempts = [...buyers, ...buyers.slice(0, repeaters)];

  const responses = await Promise.all(
    attempts.map(async (userId) => {
      const response = await buy(app.http, couponId, userId);
      return {
        userId,
        status: response.status,
        body: response.body as { orderId?: number; code?: string },
      };
    }),
  );

  const successes = responses.filter(({ status }) => status === 201);
  const failures = responses.filter(({ status }) => status !== 201);
  expect(successes).toHaveLength(stock);
  expect(
    failures.filter(
      ({ status, body }) =>
        status !== 409 ||
        (body.code !== 'SOLD_OUT' && body.code !== 'ALREADY_PURCHASED'),
    ),
  ).toEqual([]);
  const winners = successes.map(({ userId }) => userId).toSorted();
  expect(new Set(winners).size).toBe(stock);

  const remaining = await redis.get(stockKey(couponId));
  expect(remaining).toBe('0');
  const { orders } = await checkInvariants(db, Number(remaining), couponId);
  expect(orders).toBe(stock);
  const rows = await db.query<{ id: string; user_id: string }>(
    'select id, user_id from orders where coupon_id = $1',
    [couponId],
  );
  expect(rows.map((row) => `${row.user_id}#${row.id}`).toSorted()).toEqual(
    successes.map(({ userId, body }) => `${userId}#${body.orderId}`).toSorted(),
  );
  expect((await redis.smembers(buyersKey(couponId))).toSorted()).toEqual(
    winners,
  );
  const details = await app.http.get(`/api/coupons/${couponId}`).expect(200);
  expect(details.body).toMatchObject({
    stock,
    remaining: 0,
    sold: stock,
    soldOut: true,
  });
  return { couponId, winners };
}

/**
 * Holds the coupon's lock from a lock service of its own on `client` (another
 * "instance"), and checks that a purchase through the app waits for it: so
 * the app's locks are on that deployment too. Closes `client`.
 */
export async function expectPurchaseWaitsForLockOn(
  client: Redis | Cluster,
  app: TestApp,
  couponId: number,
  userId: string,
): Promise<void> {
  const locks = new LockService({
    backend: new RedisLockBackend({ client, ownsClient: true }),
    keyPrefix: 'lock:',
    watchdogLeaseTime: 10_000,
    waitTime: 5_000,
    maxKeyLength: 512,
  });
  try {
    const held = await locks.acquire(couponLockKey(couponId));
    let answered = false;
    const purchase = buy(app.http, couponId, userId).then((response) => {
      answered = true;
      return response;
    });
    await sleep(500);
    expect(answered).toBe(false);
    await held.release();
    expect((await purchase).status).toBe(201);
  } finally {
    await locks.close();
  }
}
