/**
 * LockService on one Redis: fencing tokens, how they rise per key (across
 * hand-offs, expiries and a counter set back or lost), and that they are
 * issued on demand, to the holder only.
 */
import { LockLostError } from '@app/distributed-lock';
import { eventually, sleep } from '../../../test/support/lock-fixtures.js';
import {
  redis,
  service,
  useLockServiceRedis,
} from './lock-service.test-support.js';

useLockServiceRedis();

/** The hour a fencing token (server clock µs) was issued in. */
const hourOf = (token: number | undefined) =>
  Math.floor(Number(token) / 3_600e6);

describe('fencing tokens', () => {
  it('strictly increase per key across acquisitions, hand-offs and expiries', async () => {
    const locks = service();
    const seen: number[] = [];
    const first = await locks.acquire('fence', { leaseTime: 100 });
    seen.push(await first.fence());
    await sleep(150);
    const waiters = [1, 2, 3].map(() =>
      locks.using('fence', async (lock) => {
        seen.push(await lock.fence());
        await sleep(5);
      }),
    );
    await Promise.all(waiters);
    const other = await locks.acquire('another-key');
    // Per key: another key's tokens are unrelated, but also above every earlier one.
    expect(await other.fence()).toBeGreaterThan(0);
    expect(seen).toHaveLength(4);
    for (let i = 1; i < seen.length; i++)
      expect(seen[i]).toBeGreaterThan(seen[i - 1]);
  });

  it('are at least the server clock in microseconds, and rise with each holder', async () => {
    const locks = service();
    const [seconds, micros] = await redis.time();
    const clockUs = Number(seconds) * 1e6 + Number(micros);
    const tokens: number[] = [];
    for (let i = 0; i < 3; i++) {
      const handle = await locks.acquire('fence-seed');
      tokens.push(await handle.fence());
      await handle.release();
    }
    expect(tokens[0]).toBeGreaterThanOrEqual(clockUs);
    expect(tokens[0]).toBeLessThan(clockUs + 60e6);
    expect(tokens[1]).toBeGreaterThan(tokens[0]);
    expect(tokens[2]).toBeGreaterThan(tokens[1]);
    expect(Number.isSafeInteger(tokens[2])).toBe(true);
  });

  it('keep rising when the counter is set back, as a failover to a lagging replica does', async () => {
    const locks = service();
    const counter = 'lock:{fence-set-back}:fence';
    const issued: number[] = [];
    for (let i = 0; i < 3; i++) {
      const handle = await locks.acquire('fence-set-back');
      issued.push(await handle.fence());
      await handle.release();
    }
    // The replica promoted in a failover had received only the first token.
    await redis.set(counter, String(issued[0]));
    const afterFailover = await locks.acquire('fence-set-back');
    expect(await afterFailover.fence()).toBeGreaterThan(issued[2]);
    await afterFailover.release();
  });

  it('count on from a counter ahead of the server clock, and keep it for a day', async () => {
    const locks = service();
    const counter = 'lock:{fence-ahead}:fence';
    const [seconds, micros] = await redis.time();
    // An hour ahead: tokens issued while the server clock read later.
    const ahead = (Number(seconds) + 3_600) * 1e6 + Number(micros);
    await redis.set(counter, String(ahead));
    const tokens: number[] = [];
    for (const fence of [false, true]) {
      const handle = await locks.acquire('fence-ahead', { fence });
      tokens.push(await handle.fence());
      await handle.release();
    }
    expect(tokens).toEqual([ahead + 1, ahead + 2]);
    expect(await redis.get(counter)).toBe(String(ahead + 2));
    expect(await redis.pttl(counter)).toBeGreaterThan(86_000_000);
    // Behind the clock again: the token is the clock, written as digits.
    await redis.set(counter, '7');
    const next = await locks.acquire('fence-ahead', { fence: true });
    const nextFence = await next.fence();
    await next.release();
    expect(nextFence).toBeGreaterThan(ahead - 3_600e6);
    expect(await redis.get(counter)).toBe(String(nextFence));
    expect(await redis.pttl(counter)).toBeGreaterThan(86_000_000);
  });

  it('keep their counter a day from its first token, and renew that day once an hour', async () => {
    const locks = service();
    const counter = 'lock:{fence-expiry}:fence';
    const fresh = await locks.acquire('fence-expiry', { fence: true });
    await fresh.release();
    expect(await redis.pttl(counter)).toBeGreaterThan(86_000_000);
    // As if the day was set nearly a day ago, by a token of this hour.
    await redis.pexpire(counter, 60_000);
    const sameHour = await locks.acquire('fence-expiry', { fence: true });
    await sameHour.release();
    // Not renewed within the hour (unless the hour turned meanwhile).
    if (hourOf(sameHour.fencingToken) === hourOf(fresh.fencingToken))
      expect(await redis.pttl(counter)).toBeLessThanOrEqual(60_000);
    const [seconds] = await redis.time();
    // The last token from an earlier hour: the day is set anew.
    await redis.set(
      counter,
      String((Number(seconds) - 3_600) * 1e6),
      'PX',
      60_000,
    );
    const nextHour = await locks.acquire('fence-expiry', { fence: true });
    await nextHour.release();
    expect(await redis.pttl(counter)).toBeGreaterThan(86_000_000);
  });

  it('keep rising when the counter vanishes or is found unseeded', async () => {
    const locks = service();
    const counter = 'lock:{fence-gone}:fence';
    const first = await locks.acquire('fence-gone');
    const firstFence = await first.fence();
    await first.release();
    // The counter expired (or Redis lost it) while the lock was idle.
    await redis.del(counter);
    const afterLoss = await locks.acquire('fence-gone');
    const afterLossFence = await afterLoss.fence();
    await afterLoss.release();
    // A counter created by a bare INCR (for instance after it expired while a
    // waiter's script ran) holds a small number: it must be re-seeded.
    await redis.set(counter, '7');
    const afterReset = await locks.acquire('fence-gone');
    const afterResetFence = await afterReset.fence();
    await afterReset.release();
    expect(afterLossFence).toBeGreaterThan(firstFence);
    expect(afterResetFence).toBeGreaterThan(afterLossFence);
  });

  it('rise across a hand-off from an unseeded counter too', async () => {
    const locks = service();
    const holder = await locks.acquire('fence-handoff');
    const holderFence = await holder.fence();
    await redis.set('lock:{fence-handoff}:fence', '3');
    const waiter = locks.acquire('fence-handoff', { waitTime: 5_000 });
    await eventually(
      async () => (await redis.llen('lock:{fence-handoff}:queue')) === 1,
    );
    await holder.release();
    const next = await waiter;
    const nextFence = await next.fence();
    await next.release();
    expect(nextFence).toBeGreaterThan(holderFence);
  });
});

describe('fencing tokens on demand', () => {
  it('cost nothing for a lock that never asks for one', async () => {
    const locks = service();
    await locks.using('no-fence', () => undefined);
    expect(await redis.exists('lock:{no-fence}:fence')).toBe(0);
  });

  it('are issued only to the holder: not after the lease ran out, nor after release', async () => {
    const locks = service();
    const late = await locks.acquire('fence-late', { leaseTime: 100 });
    await sleep(150);
    const next = await locks.acquire('fence-late', { waitTime: 0 });
    const nextFence = await next.fence();
    await expect(late.fence()).rejects.toBeInstanceOf(LockLostError);
    expect(late.lost).toBe(true);
    // The refused request issued nothing.
    expect(Number(await redis.get('lock:{fence-late}:fence'))).toBe(nextFence);
    await next.release();
    await expect(next.fence()).resolves.toBe(nextFence);
    const released = await locks.acquire('fence-late');
    await released.release();
    await expect(released.fence()).rejects.toBeInstanceOf(LockLostError);
  });

  it('issue one token per hold however many ask at once, and a lock handed over from the queue brings its own', async () => {
    const locks = service();
    const holder = await locks.acquire('fence-once');
    const asked = await Promise.all([holder.fence(), holder.fence()]);
    expect(asked[1]).toBe(asked[0]);
    const counter = 'lock:{fence-once}:fence';
    expect(Number(await redis.get(counter))).toBe(asked[0]);
    const waiter = service().acquire('fence-once', { waitTime: 5_000 });
    await eventually(
      async () => (await redis.llen('lock:{fence-once}:queue')) === 1,
    );
    await holder.release();
    const next = await waiter;
    const handedFence = Number(await redis.get(counter));
    expect(handedFence).toBeGreaterThan(asked[0]);
    expect(await next.fence()).toBe(handedFence);
    expect(Number(await redis.get(counter))).toBe(handedFence);
    await next.release();
  });
});
