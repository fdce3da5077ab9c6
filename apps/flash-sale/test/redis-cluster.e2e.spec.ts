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
  useAppOnRedisDeployment,
} from './support/concurrent-sale.js';
import { buy, createCoupon, findTestPostgres } from './support/harness.js';

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
  const sale = useAppOnRedisDeployment(postgres!, {
    start: () => startRedisCluster({ masters: 3 }),
    client: clusterClient,
    env: (cluster) => ({
      REDIS_CLUSTER_NODES: cluster.startupNodes
        .map(({ host, port }) => `${host}:${port}`)
        .join(','),
    }),
  });

  /** The index of the master that serves `slot`. */
  function masterOf(slot: number): number {
    return sale.deployment.masters.findIndex((node) =>
      node.slots.some(([first, last]) => first <= slot && slot <= last),
    );
  }

  it('connects with a Cluster client and reports healthy', async () => {
    expect(sale.app.app.get(REDIS_CLIENT)).toBeInstanceOf(Cluster);
    const health = await sale.app.http.get('/health').expect(200);
    expect(health.body).toMatchObject({
      ok: true,
      redis: 'up',
      database: 'up',
    });
  });

  it('sells a small stock to a crowd: no oversell, one order per user, Redis and the database agree', async () => {
    await sellUnderContention(sale.app, sale.db, sale.redis, {
      stock: 5,
      users: 60,
      repeaters: 20,
    });
  });

  it('keeps each coupon in one slot, and lists coupons whose keys are on different masters', async () => {
    const ids = [
      await createCoupon(sale.app.http, { stock: 3 }),
      await createCoupon(sale.app.http, { stock: 4 }),
      await createCoupon(sale.app.http, { stock: 5 }),
    ];
    for (const id of ids) {
      expect(sale.deployment.slotOf(stockKey(id))).toBe(
        sale.deployment.slotOf(buyersKey(id)),
      );
    }
    const masters = new Set(
      ids.map((id) => masterOf(sale.deployment.slotOf(stockKey(id)))),
    );
    // A single MGET over these keys would fail with CROSSSLOT.
    expect(masters.size).toBeGreaterThan(1);
    await buy(sale.app.http, ids[1], 'lister').expect(201);

    const list = await sale.app.http.get('/api/coupons?limit=3').expect(200);

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
    const couponId = await createCoupon(sale.app.http, { stock: 2 });
    await expectPurchaseWaitsForLockOn(
      clusterClient(sale.deployment),
      sale.app,
      couponId,
      'patient',
    );
  });
});
