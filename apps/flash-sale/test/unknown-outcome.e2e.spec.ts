/**
 * A sale whose statement gets no answer (timeout, cut connection) through a
 * TCP proxy between the app and PostgreSQL: the outcome is found out, never
 * guessed. The server session that ran the statement is ended before the
 * orders are read, so a statement still on its way cannot commit after the
 * purchase was undone; a committed one is answered as the success it was.
 */
import { Redis } from 'ioredis';
import {
  startTcpProxy,
  type TcpProxy,
} from '../../../test/support/tcp-proxy.js';
import { eventually } from '../../../test/support/lock-fixtures.js';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  findTestPostgres,
  startApp,
  useSaleBackends,
  type TestApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

/** The SQL text of the sale's statement (PurchaseLedger's SELL). */
const SALE_STATEMENT = 'insert into orders';

describe.skipIf(!postgres)('a sale whose statement gets no answer', () => {
  const sale = useSaleBackends(postgres!);
  let proxy: TcpProxy;
  let shop: TestApp;
  let redis: Redis;

  beforeAll(async () => {
    const direct = new URL(sale.db.url);
    proxy = await startTcpProxy({ targetPort: Number(direct.port || 5432) });
    const proxied = new URL(sale.db.url);
    proxied.port = String(proxy.port);
    redis = new Redis(sale.redisServer.url);
    shop = await startApp({
      redisUrl: sale.redisServer.url,
      databaseUrl: proxied.toString(),
      // Statements: 800 ms on the server, 1.8 s on the client.
      backendTimeout: 400,
      dbPoolSize: 3,
      // The coupon from memory: a purchase needs the database for its sale only.
      couponCacheTtl: 60_000,
      stockRepairInterval: 0,
    });
  });

  afterAll(async () => {
    await shop?.close();
    redis?.disconnect();
    await proxy?.close();
  });

  /** A coupon of `stock` units, loaded into Redis by a first sale. */
  async function couponOnSale(stock: number): Promise<number> {
    const couponId = await createCoupon(shop.http, { stock });
    await buy(shop.http, couponId, 'first').expect(201);
    return couponId;
  }

  async function orderOf(couponId: number, user: string) {
    const rows = await sale.db.query<{ id: string }>(
      'select id from orders where coupon_id = $1 and user_id = $2',
      [couponId, user],
    );
    return rows[0] ? Number(rows[0].id) : undefined;
  }

  it('answers 201 with the order when the statement committed and only its answer was lost', async () => {
    const couponId = await couponOnSale(5);
    const cut = proxy.cutAfterRequest(SALE_STATEMENT, { afterMs: 100 });

    const response = await buy(shop.http, couponId, 'kept');
    await cut;

    expect(response.status).toBe(201);
    expect(response.body.orderId).toBe(await orderOf(couponId, 'kept'));
    expect(await redis.sismember(buyersKey(couponId), 'kept')).toBe(1);
    await checkInvariants(sale.db, 3, couponId);
  });

  it('ends the session that got the statement late, so it never commits after the purchase was undone', async () => {
    const couponId = await couponOnSale(5);
    const held = proxy.holdRequest(SALE_STATEMENT);

    const response = await buy(shop.http, couponId, 'late');
    // The statement reaches the server now, if its session is still there.
    (await held).release();

    expect(response.status).toBe(503);
    expect(response.body).toMatchObject({ code: 'UNAVAILABLE' });
    expect(await redis.sismember(buyersKey(couponId), 'late')).toBe(0);
    expect(await redis.get(stockKey(couponId))).toBe('4');
    // Time for a late statement to run, had its session survived.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await orderOf(couponId, 'late')).toBeUndefined();
    await checkInvariants(sale.db, 4, couponId);

    const retry = await buy(shop.http, couponId, 'late').expect(201);
    expect(retry.body.orderId).toBe(await orderOf(couponId, 'late'));
    await checkInvariants(sale.db, 3, couponId);
  });

  it('drops the coupon from Redis when even that cannot be found out, and the database decides the retry', async () => {
    const couponId = await couponOnSale(5);
    const held = proxy.holdRequest(SALE_STATEMENT);
    const pending = buy(shop.http, couponId, 'unknown').then((r) => r);
    const hold = await held;
    // Nothing gets through now: the session cannot be ended, nor the orders read.
    proxy.freeze();
    let response;
    try {
      response = await pending;
    } finally {
      proxy.thaw();
      hold.release();
    }

    expect(response.status).toBe(503);
    expect(await redis.exists(stockKey(couponId))).toBe(0);
    // The late statement may commit now: whatever it did, the database has
    // the last word, and the coupon is reloaded from it by the next purchase.
    const order = await eventually(
      async () => (await orderOf(couponId, 'unknown')) !== undefined,
      3_000,
    )
      .then(() => orderOf(couponId, 'unknown'))
      .catch(() => undefined);
    const retry = await buy(shop.http, couponId, 'unknown');
    if (order === undefined) {
      expect(retry.status).toBe(201);
    } else {
      expect(retry.status).toBe(409);
      expect(retry.body).toMatchObject({
        code: 'ALREADY_PURCHASED',
        orderId: order,
      });
    }
    await checkInvariants(sale.db, 3, couponId);
  });

  it('undoes at once when the server refused the statement (cancelled at its timeout)', async () => {
    const couponId = await couponOnSale(5);
    // Another transaction holds the coupon's row: the sale's UPDATE waits
    // for it until the server cancels the statement.
    const blocker = await sale.db.connect();
    try {
      await blocker.query('begin');
      await blocker.query('select 1 from coupons where id = $1 for update', [
        couponId,
      ]);
      const response = await buy(shop.http, couponId, 'cancelled');
      expect(response.status).toBe(503);
    } finally {
      await blocker.query('rollback');
      blocker.release();
    }

    expect(await orderOf(couponId, 'cancelled')).toBeUndefined();
    expect(await redis.get(stockKey(couponId))).toBe('4');
    await checkInvariants(sale.db, 4, couponId);
  });
});
