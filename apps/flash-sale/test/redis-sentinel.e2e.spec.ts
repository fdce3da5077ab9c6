import { Redis } from 'ioredis';
import {
  startSentinelGroup,
  type SentinelGroup,
} from '../../../test/support/redis-sentinel.js';
import { REDIS_CLIENT } from '../src/redis/redis-client.js';
import {
  expectPurchaseWaitsForLockOn,
  sellUnderContention,
  useAppOnRedisDeployment,
} from './support/concurrent-sale.js';
import {
  buy,
  createCoupon,
  findTestPostgres,
  sleep,
} from './support/harness.js';

const postgres = await findTestPostgres();

/** A client of the test's own on the master the Sentinels name. */
function sentinelClient(group: SentinelGroup): Redis {
  const client = new Redis({
    sentinels: group.sentinels,
    name: group.name,
    maxRetriesPerRequest: 1,
  });
  client.on('error', () => undefined);
  return client;
}

/** The port of the server `client` is talking to. */
async function serverPort(client: Redis): Promise<number> {
  const info = await client.info('server');
  return Number(/^tcp_port:(\d+)/m.exec(info)?.[1]);
}

describe.skipIf(!postgres)('the app on Redis behind Sentinel', () => {
  const sale = useAppOnRedisDeployment(postgres!, {
    start: () => startSentinelGroup({ name: 'flashsale' }),
    client: sentinelClient,
    env: (group) => ({
      REDIS_SENTINELS: group.sentinels
        .map(({ host, port }) => `${host}:${port}`)
        .join(','),
      REDIS_SENTINEL_NAME: group.name,
    }),
  });

  it('connects to the master through the Sentinels and reports healthy', async () => {
    const client = sale.app.app.get<Redis>(REDIS_CLIENT);
    expect(client.options.sentinels).toHaveLength(3);
    expect(client.options.name).toBe('flashsale');
    expect(await serverPort(client)).toBe(sale.deployment.master.port);
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

  it('takes the coupon lock on the master: a purchase waits while another instance holds it', async () => {
    const couponId = await createCoupon(sale.app.http, { stock: 2 });
    await expectPurchaseWaitsForLockOn(
      sentinelClient(sale.deployment),
      sale.app,
      couponId,
      'patient',
    );
  });

  it('follows a failover to the promoted replica', async () => {
    const before = await createCoupon(sale.app.http, { stock: 3 });
    await buy(sale.app.http, before, 'early').expect(201);
    const oldPort = sale.deployment.master.port;

    await sale.deployment.killMaster();
    const promoted = await sale.deployment.waitForFailover();

    expect(promoted.port).not.toBe(oldPort);
    // The client reconnects through the Sentinels in the background.
    const deadline = Date.now() + 15_000;
    while ((await sale.app.http.get('/health')).status !== 200) {
      if (Date.now() > deadline) throw new Error('/health stayed 503');
      await sleep(200);
    }
    expect(await serverPort(sale.app.app.get<Redis>(REDIS_CLIENT))).toBe(
      promoted.port,
    );
    const after = await createCoupon(sale.app.http, { stock: 1 });
    await buy(sale.app.http, after, 'late').expect(201);
    await buy(sale.app.http, after, 'later').expect(409);
    await buy(sale.app.http, before, 'early').expect(409);
  }, 45_000);
});
