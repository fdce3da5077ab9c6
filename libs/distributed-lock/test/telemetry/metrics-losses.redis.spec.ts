/**
 * Prometheus metrics of holds lost for each reason but an ended `leaseTime`
 * (metrics.redis.spec.ts has that one), and of the watchdog's own renewals:
 * each caused for real on a real Redis, then read from a parsed scrape.
 */
import { Redis } from 'ioredis';
import { sessionKey, sessionOf } from '../../src/session/session-token.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { sleep, startMetricsApp, type MetricsApp } from './metrics-app.js';

let server: RedisServerHandle;
let redis: Redis;
let app: MetricsApp | undefined;

beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const lost = 'distributed_lock_lost_total';
const renewals = 'distributed_lock_renewals_total';

describe('metrics: lost holds and renewals', () => {
  it('counts a hold whose key another owner took as taken-over', async () => {
    app = await startMetricsApp(server.url);
    const handle = await app.locks.acquire('stolen:1', { leaseTime: 5_000 });
    // As a failover or an eviction might: the key is gone, another owner sets it.
    await redis.set(
      app.locks.storeKey('stolen:1'),
      'another-owner',
      'PX',
      5_000,
    );
    expect(await handle.extend(5_000)).toBe(false);

    const scraped = await app.scrape();
    expect(scraped.sum(lost, { name: 'stolen:*', reason: 'taken-over' })).toBe(
      1,
    );
    expect(scraped.sum(lost)).toBe(1);
    expect(scraped.sum(renewals, { kind: 'lease', result: 'gone' })).toBe(1);
  });

  it('counts the holds of a lapsed process session as session-expired, and its renewal as gone', async () => {
    app = await startMetricsApp(server.url, { sessionTtl: 300 });
    const handle = await app.locks.acquire('bound:1');
    const session = sessionOf(String(handle.token))!;
    // The session record vanishes (as if it had expired): its next renewal,
    // within a third of the TTL, finds it gone.
    await redis.del(sessionKey('lock:', session));
    await new Promise((resolve) =>
      handle.signal.addEventListener('abort', resolve, { once: true }),
    );
    expect(handle.lost).toBe(true);

    const scraped = await app.scrape();
    expect(
      scraped.sum(lost, { name: 'bound:*', reason: 'session-expired' }),
    ).toBe(1);
    expect(scraped.sum(lost)).toBe(1);
    expect(scraped.sum(renewals, { kind: 'session', result: 'gone' })).toBe(1);
    await handle.release();
  });

  it('counts a watchdog hold whose renewals cannot reach Redis as renewal-failed', async () => {
    app = await startMetricsApp(server.url, {
      sessionTtl: false,
      watchdogLeaseTime: 300,
      commandTimeout: 100,
    });
    const handle = await app.locks.acquire('cut-off:1');
    await server.freeze();
    try {
      await sleep(450);
    } finally {
      await server.thaw();
    }
    expect(handle.lost).toBe(true);
    const scraped = await app.scrape();
    expect(
      scraped.sum(lost, { name: 'cut-off:*', reason: 'renewal-failed' }),
    ).toBe(1);
    expect(
      scraped.sum('distributed_lock_backend_errors_total', {
        operation: 'extend',
      }),
    ).toBeGreaterThanOrEqual(1);
    await handle.release();
  });

  it('counts the renewals the watchdog makes on its own, with no extend() call', async () => {
    app = await startMetricsApp(server.url, {
      sessionTtl: false,
      watchdogLeaseTime: 150,
    });
    // Renewed every 50 ms: at least 4 times in 250 ms.
    await app.locks.using('watched:1', () => sleep(250));

    const scraped = await app.scrape();
    expect(
      scraped.sum(renewals, { kind: 'lease', result: 'kept' }),
    ).toBeGreaterThanOrEqual(4);
    expect(scraped.sum(renewals, { kind: 'lease', result: 'gone' })).toBe(0);
    expect(scraped.sum(lost)).toBe(0);
  });
});
