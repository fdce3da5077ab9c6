/**
 * A lock passed in memory to the next waiter of the same process (lock
 * cohorting) is a grant only once Redis has confirmed it: with Redis frozen,
 * or after it lost its data, the successor must not run.
 */
import { LockBackendError, type LockHandle } from '@app/distributed-lock';
import {
  eventually,
  settledFlag,
  sleep,
} from '../../../../test/support/lock-fixtures.js';
import {
  waitingIn,
  type OpenedLocks,
} from '../../../../test/support/lock-clients.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';

// Every test freezes or restarts the server: a server of its own.
const fixture = useRedisFixture({ serverPerTest: true });
const open = fixture.open;

/**
 * `here` holds `name` as a lock that came from the queue (so it may pass it
 * on in memory), and `count` more callers of `here` wait for it in memory.
 */
async function heldWithLocalWaiters(
  here: OpenedLocks,
  name: string,
  count: number,
): Promise<{ holder: LockHandle; waiting: Promise<LockHandle>[] }> {
  const first = await here.locks.acquire(name);
  const second = here.locks.acquire(name, { waitTime: 5_000 });
  await eventually(
    async () => (await fixture.redis.llen(`lock:{${name}}:queue`)) === 1,
  );
  await first.release();
  const holder = await second;
  const waiting: Promise<LockHandle>[] = [];
  for (let i = 1; i <= count; i += 1) {
    waiting.push(here.locks.acquire(name, { waitTime: 5_000 }));
    await eventually(() => waitingIn(here.backend) === i);
  }
  expect(await fixture.redis.llen(`lock:{${name}}:queue`)).toBe(0);
  return { holder, waiting };
}

describe('a pass in memory', () => {
  it('with Redis frozen: the successor never runs, and it and every waiter behind it fail with LockBackendError within commandTimeout', async () => {
    const here = open({ commandTimeoutMs: 400 });
    const { holder, waiting } = await heldWithLocalWaiters(here, 'frozen', 2);
    const settled = waiting.map(settledFlag);
    await fixture.server.freeze();
    const started = Date.now();
    await expect(holder.release()).rejects.toBeInstanceOf(LockBackendError);
    // Until Redis answered, nobody here ran.
    for (const result of await Promise.allSettled(waiting)) {
      expect(result.status).toBe('rejected');
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(
        LockBackendError,
      );
    }
    expect(Date.now() - started).toBeLessThan(400 + 300);
    expect(settled.every((isSettled) => isSettled())).toBe(true);
    await fixture.server.thaw();
    // The pass Redis ran late is given back: the key does not stay taken.
    await eventually(
      async () => (await fixture.redis.exists('lock:{frozen}')) === 0,
    );
  });

  it('after Redis lost the lock and another service took it: the successor waits for that holder', async () => {
    const here = open();
    const { holder, waiting } = await heldWithLocalWaiters(here, 'emptied', 1);
    const settled = settledFlag(waiting[0]);
    await fixture.server.restart();
    const rival = open();
    const other = await rival.locks.acquire('emptied');
    expect(await holder.release()).toBe(false);
    await sleep(300);
    expect(settled()).toBe(false);
    expect(await fixture.redis.get('lock:{emptied}')).toBe(other.token);
    const otherFence = await other.fence();
    await other.release();
    const next = await waiting[0];
    expect(await fixture.redis.get('lock:{emptied}')).toBe(next.token);
    expect(await next.fence()).toBeGreaterThan(otherFence);
    await next.release();
  });

  it('a lock lost before it was passed on is not passed: the successor takes it in Redis', async () => {
    const here = open();
    const { holder, waiting } = await heldWithLocalWaiters(here, 'lost', 1);
    // Deleted behind the holder's back (by hand, or a Redis that lost its data).
    await fixture.redis.del('lock:{lost}');
    expect(await holder.release()).toBe(false);
    const next = await waiting[0];
    expect(await fixture.redis.get('lock:{lost}')).toBe(next.token);
    await next.fence();
    expect(next.lost).toBe(false);
    expect(await next.release()).toBe(true);
    expect(await fixture.redis.exists('lock:{lost}')).toBe(0);
  });

  it('a pass Redis confirms only after its lease may have ended is confirmed again before the successor runs', async () => {
    const here = open({ handoffLeaseMs: 300 });
    const { holder, waiting } = await heldWithLocalWaiters(here, 'late', 1);
    const settled = settledFlag(waiting[0]);
    // The holder's own lease, handed over short, is topped up first.
    await eventually(
      async () => (await fixture.redis.pttl('lock:{late}')) > 1_000,
    );
    await fixture.server.freeze();
    const releasing = holder.release();
    await sleep(500);
    expect(settled()).toBe(false);
    await fixture.server.thaw();
    expect(await releasing).toBe(true);
    const next = await waiting[0];
    // It runs on the full lease it asked for, set after the pause.
    expect(await fixture.redis.pttl('lock:{late}')).toBeGreaterThan(20_000);
    expect(next.expiresAt - Date.now()).toBeGreaterThan(20_000);
    expect(next.lost).toBe(false);
    await next.release();
    expect(await fixture.redis.exists('lock:{late}')).toBe(0);
  });
});
