/**
 * Prometheus metrics (`metrics` module option): a real scrape of a Nest app's
 * `/metrics`, parsed, after real lock traffic on a real Redis. The other
 * lost-hold reasons and the watchdog's renewals: metrics-losses.redis.spec.ts.
 */
import { Injectable } from '@nestjs/common';
import {
  DistributedLock,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import { openLocks } from '../../../../test/support/lock-clients.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import {
  registry,
  sleep,
  startMetricsApp,
  type MetricsApp,
} from './metrics-app.js';

@Injectable()
class Reports {
  @DistributedLock('report:<0>', { waitTime: 0 })
  run(day: string): string {
    return day;
  }
}

let server: RedisServerHandle;
let app: MetricsApp | undefined;

beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(() => server.stop());
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function startApp(
  options: Partial<DistributedLockModuleOptions> = {},
): Promise<MetricsApp> {
  app = await startMetricsApp(server.url, options, [Reports]);
  return app;
}

describe('metrics: Prometheus scrape', () => {
  it('counts acquisitions by outcome and times waits and holds, labelled by name, never by key', async () => {
    const { locks, scrape } = await startApp();
    for (let i = 0; i < 20; i++)
      await locks.using(`coupon:${i}`, () => sleep(1));
    const held = await locks.acquire('coupon:busy');
    expect(await locks.tryAcquire('coupon:busy')).toBeNull();
    await expect(
      locks.acquire('coupon:busy', { waitTime: 30 }),
    ).rejects.toThrow();
    await expect(
      locks.acquire('coupon:busy', {
        waitTime: 5_000,
        signal: AbortSignal.timeout(30),
      }),
    ).rejects.toThrow();
    await locks.using('price-list', () => undefined, { name: 'prices' });

    const during = await scrape();
    expect(during.sum('distributed_lock_holds', { name: 'coupon:*' })).toBe(1);
    await held.release();

    const after = await scrape();
    const coupons = { name: 'coupon:*' };
    const acquisitions = 'distributed_lock_acquisitions_total';
    expect(after.types.get(acquisitions)).toBe('counter');
    expect(after.sum(acquisitions, { ...coupons, outcome: 'acquired' })).toBe(
      21,
    );
    expect(after.sum(acquisitions, { ...coupons, outcome: 'busy' })).toBe(1);
    expect(after.sum(acquisitions, { ...coupons, outcome: 'timeout' })).toBe(1);
    expect(after.sum(acquisitions, { ...coupons, outcome: 'aborted' })).toBe(1);
    expect(after.sum(acquisitions, { name: 'prices' })).toBe(1);
    // 20 keys, one series: names are templates.
    expect(after.values(acquisitions, 'name')).toEqual(['coupon:*', 'prices']);

    expect(after.types.get('distributed_lock_wait_seconds')).toBe('histogram');
    expect(
      after.sum('distributed_lock_wait_seconds_count', {
        ...coupons,
        outcome: 'acquired',
      }),
    ).toBe(21);
    // The timed-out wait lasted its 30 ms.
    expect(
      after.sum('distributed_lock_wait_seconds_sum', {
        ...coupons,
        outcome: 'timeout',
      }),
    ).toBeGreaterThanOrEqual(0.025);
    expect(after.sum('distributed_lock_hold_seconds_count', coupons)).toBe(21);
    expect(
      after.sum('distributed_lock_hold_seconds_sum', coupons),
    ).toBeGreaterThan(0.015);
    expect(after.sum('distributed_lock_holds')).toBe(0);
    expect(after.sum('distributed_lock_waiters')).toBe(0);
  });

  it('names a decorated method by its key template', async () => {
    const { scrape } = await startApp();
    const reports = app!.app.get(Reports);
    for (const day of ['mon', 'tue', 'wed']) await reports.run(day);
    const scraped = await scrape();
    expect(
      scraped.sum('distributed_lock_acquisitions_total', {
        name: 'report:<0>',
        outcome: 'acquired',
      }),
    ).toBe(3);
  });

  it('shows a waiter in the gauge while it waits, and counts local and remote hand-offs', async () => {
    const { locks, scrape } = await startApp();
    const other = openLocks(server.url);
    try {
      // Remote: another connection holds it, ours waits in Redis's queue.
      const foreign = await other.locks.acquire('queue:1');
      const waiting = locks.acquire('queue:1');
      await sleep(50);
      expect(
        (await scrape()).sum('distributed_lock_waiters', { name: 'queue:*' }),
      ).toBe(1);
      await foreign.release();
      await (await waiting).release();

      // Handed on: three callers of this process, two wait. The first
      // release goes through Redis's queue; the lock then came from the
      // queue, and is passed on in memory.
      const first = await locks.acquire('queue:2');
      const later = [locks.acquire('queue:2'), locks.acquire('queue:2')];
      await sleep(30);
      await first.release();
      for (const next of later) await (await next).release();
    } finally {
      await other.close();
    }
    const scraped = await scrape();
    const handoffs = 'distributed_lock_handoffs_total';
    expect(scraped.sum(handoffs, { kind: 'remote' })).toBe(2);
    expect(scraped.sum(handoffs, { kind: 'local' })).toBe(1);
  });

  it('counts lost holds by reason, lease and session renewals, and store failures', async () => {
    const { locks, scrape } = await startApp({
      sessionTtl: 300,
      commandTimeout: 300,
    });
    // Opens the process session, renewed from then on.
    await (await locks.acquire('session:1')).release();
    const expiring = await locks.acquire('lease:1', { leaseTime: 100 });
    expect(await expiring.extend(150)).toBe(true);
    await sleep(400);
    expect(expiring.lost).toBe(true);
    await expiring.release();

    const before = await scrape();
    expect(
      before.sum('distributed_lock_lost_total', {
        name: 'lease:*',
        reason: 'lease-expired',
      }),
    ).toBe(1);
    const renewals = 'distributed_lock_renewals_total';
    expect(before.sum(renewals, { kind: 'lease', result: 'kept' })).toBe(1);
    // A 300 ms session is renewed every 100 ms.
    expect(
      before.sum(renewals, { kind: 'session', result: 'kept' }),
    ).toBeGreaterThanOrEqual(2);
    expect(before.sum('distributed_lock_backend_errors_total')).toBe(0);

    await server.freeze();
    try {
      await expect(
        locks.acquire('frozen:1', { waitTime: 0 }),
      ).rejects.toThrow();
    } finally {
      await server.thaw();
    }
    const after = await scrape();
    expect(
      after.sum('distributed_lock_acquisitions_total', {
        name: 'frozen:*',
        outcome: 'error',
      }),
    ).toBe(1);
    expect(
      after.sum('distributed_lock_backend_errors_total'),
    ).toBeGreaterThanOrEqual(1);
  });

  it('counts names beyond maxNames as "other"', async () => {
    const { locks, scrape } = await startApp({
      metrics: { registry, maxNames: 2 },
    });
    for (const name of ['a', 'b', 'c', 'd'])
      await locks.using(`${name}:1`, () => undefined);
    const scraped = await scrape();
    expect(
      scraped.values('distributed_lock_acquisitions_total', 'name'),
    ).toEqual(['a:*', 'b:*', 'other']);
    expect(
      scraped.sum('distributed_lock_acquisitions_total', { name: 'other' }),
    ).toBe(2);
  });

  it('rejects a metrics option that is neither a boolean nor an object, and a bad name', async () => {
    await expect(startApp({ metrics: 'yes' as never })).rejects.toThrow(
      TypeError,
    );
    const { locks } = await startApp();
    await expect(locks.acquire('x:1', { name: '' })).rejects.toThrow(TypeError);
  });
});
