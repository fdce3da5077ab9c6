import { Cluster } from 'ioredis';
import {
  startRedisCluster,
  type RedisCluster,
} from '../../../test/support/redis-cluster.js';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import { REDIS_CLIENT } from '../src/redis/redis-client.js';
import {
  expectPurchaseWaitsForLockOn,
  sellUnderContention,
} from './support/concurrent-sale.js';
import {
  buy,
  createCoupon,
  createTestDatabase,
  findTestPostgres,
  startApp,
  type TestApp,
  type TestDatabase,
} from './support/harness.js';

const postgres = await findTestPostgres();

/** A client of the test's own on the cluster, to look at the keys. */
function clusterClient(cluster: RedisCluster): Cluster {
  const client = new Cluster(cluster.startupNodes, {
    redisOptions: { maxRetriesPerRequest: 1 },
  });
  client.on('error', () => undefined);
  return client;
}

describe.skipIf(!postgres)('the app on a 3-master Redis Cluster', () => {
  let cluster: RedisCluster;
  let db: TestDatabase;
  let app: TestApp;
  let redis: Cluster;

  beforeAll(async () => {
    [cluster, db] = await Promise.all([
      startRedisCluster({ masters: 3 }),
      createTestDatabase(postgres!),
    ]);
    redis = clusterClient(cluster);
    // Configured by the environment alone, as in production.
    app = await startApp(
      {},
      {
        REDIS_CLUSTER_NODES: cluster.startupNodes
          .map(({ host, port }) => `${host}:${port}`)
          .join(','),
        DATABASE_URL: db.url,
        SECKILL_WAIT_MS: '20000',
      },
    );
  });

  afterAll(async () => {
    await app?.close();
    redis?.disconnect();
    await db?.drop();
    await cluster?.stop();
  });

  /** The index of the master that serves `slot`. */
  function masterOf(slot: number): number {
    return cluster.masters.findIndex((node) =>
      node.slots.some(([first, last]) => first <= slot && slot <= last),
    );
  }

  it('connects with a Cluster client and reports healthy', async () => {
    expect(app.app.get(REDIS_CLIENT)).toBeInstanceOf(Cluster);
    const health = await app.http.get('/health').expect(200);
    expect(health.body).toMatchObject({
      ok: true,
      redis: 'up',
      database: 'up',
    });
  });

  it('sells a small stock to a crowd: no oversell, one order per user, Redis and the database agree', async () => {
    await sellUnderContention(app, db, redis, {
      stock: 5,
      users: 60,
      repeaters: 20,
    });
  });

  it('keeps each coupon in one slot, and lists coupons whose keys are on different masters', async () => {
    const ids = [
      await createCoupon(app.http, { stock: 3 }),
      await createCoupon(app.http, { stock: 4 }),
      await createCoupon(app.http, { stock: 5 }),
    ];
    for (const id of ids) {
      expect(cluster.slotOf(stockKey(id))).toBe(cluster.slotOf(buyersKey(id)));
    }
    const masters = new Set(
      ids.map((id) => masterOf(cluster.slotOf(stockKey(id)))),
    );
    // A single MGET over these keys would fail with CROSSSLOT.
    expect(masters.size).toBeGreaterThan(1);
    await buy(app.http, ids[1], 'lister').expect(201);

    const list = await app.http.get('/api/coupons?limit=3').expect(200);

    expect(
      (list.body as { id: number; remaining: number }[])
        .map(({ id, remaining }) => ({ id, remaining }))
        .toSorted((a, b) => a.id - b.id),
    ).toEqual([
      { id: ids[0], remaining: 3 },
      { id: ids[1], remaining: 3 },
      { id: ids[2], remaining: 5 },
    ]);
  });

  it('takes the coupon lock on the cluster: a purchase waits while another instance holds it', async () => {
    const couponId = await createCoupon(app.http, { stock: 2 });
    await expectPurchaseWaitsForLockOn(
      clusterClient(cluster),
      app,
      couponId,
      'patient',
    );
  });
});
