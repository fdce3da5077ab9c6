/**
 * Client settings that fight the backend: an ioredis keyPrefix, and a
 * flushed script cache.
 */
import { eventually } from '../../../../test/support/lock-fixtures.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength } = fixture;

describe('client key prefix and script cache', () => {
  it('hands over across processes and within one when the client has a keyPrefix', async () => {
    const a = open({ client: { keyPrefix: 'app:' } });
    const b = open({ client: { keyPrefix: 'app:' } });
    const holder = await a.locks.acquire('pfx');
    expect(await fixture.redis.get('app:lock:{pfx}')).toBe(holder.token);
    const remote = b.locks.acquire('pfx', { waitTime: 5_000 });
    await eventually(
      async () => (await fixture.redis.llen('app:lock:{pfx}:queue')) === 1,
    );
    const local = a.locks.acquire('pfx', { waitTime: 5_000 });
    await eventually(
      async () => (await fixture.redis.llen('app:lock:{pfx}:queue')) === 2,
    );

    // The waiter in the releasing process goes first (a local hand-off, in
    // memory), then the older one in the other process.
    let started = performance.now();
    await holder.release();
    const first = await local;
    expect(performance.now() - started).toBeLessThan(300);
    const firstFence = await first.fence();
    started = performance.now();
    await first.release();
    const second = await remote;
    expect(performance.now() - started).toBeLessThan(300);
    expect(await second.fence()).toBeGreaterThan(firstFence);
    await second.release();
    expect(await fixture.redis.keys('lock:*')).toEqual([]);
    expect(await fixture.redis.exists('app:lock:{pfx}')).toBe(0);
  });

  it('keeps working after the script cache is flushed, also for a waiter in the queue', async () => {
    const a = open();
    const b = open();
    const holder = await a.locks.acquire('noscript');
    const holderFence = await holder.fence();
    const waiting = b.locks.acquire('noscript', { waitTime: 5_000 });
    await eventually(async () => (await queueLength('noscript')) === 1);
    await fixture.redis.script('FLUSH');
    await holder.release();
    const next = await waiting;
    const nextFence = await next.fence();
    await fixture.redis.script('FLUSH');
    expect(await next.release()).toBe(true);
    await fixture.redis.script('FLUSH');
    const again = await a.locks.acquire('noscript', { waitTime: 0 });
    expect(await again.fence()).toBeGreaterThan(nextFence);
    expect(nextFence).toBeGreaterThan(holderFence);
    await again.release();
  });
});
