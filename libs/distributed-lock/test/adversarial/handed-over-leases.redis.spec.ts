/**
 * The lease of a lock handed over from the queue: counted from when the
 * caller got it, and a hand-off read after its lease lapsed is never
 * trusted.
 */
import { expectNothingLeft } from '../../../../test/support/backend-internals.js';
import {
  eventually,
  settledFlag,
  sleep,
} from '../../../../test/support/lock-fixtures.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength, firstQueued } = fixture;

describe('leases of a lock handed over from the queue', () => {
  it('an explicit lease granted after a long wait is not reported lost at once', async () => {
    const a = open();
    const b = open();
    const holder = await a.locks.acquire('late-lease');
    const waiting = b.locks.acquire('late-lease', {
      leaseTime: 400,
      waitTime: 5_000,
    });
    await sleep(600);
    await holder.release();
    const handle = await waiting;
    expect(handle.lost).toBe(false);
    await sleep(150);
    expect(handle.lost).toBe(false);
    expect(await fixture.redis.get('lock:{late-lease}')).toBe(handle.token);
    // The lease runs from when the caller got the lock, and still just ends.
    // The local estimate errs early (by the renewal's trip to Redis), so the
    // key may outlive the notice by a moment.
    await eventually(() => handle.lost, 2_000);
    await eventually(
      async () => (await fixture.redis.exists('lock:{late-lease}')) === 0,
      200,
    );
  });
});

describe('a hand-off that arrives after it lapsed', () => {
  // The waiter cannot see when the lock was handed to it, only that it was
  // after it queued: its lease is counted from then. A message read more than
  // a hand-off lease after queueing (a paused process, a long GC) may carry a
  // grant that lapsed while another process took the lock: it is confirmed
  // with Redis before the caller runs, never trusted. (A real pause, with
  // SIGSTOP, is in faults/stale-grant.redis.spec.ts.)
  it('never reaches the caller: the waiter queues again and gets the lock from its next holder', async () => {
    const s = open({ handoffLeaseMs: 300 });
    const rival = open();
    const blocker = await rival.locks.acquire('lapsed');
    const waiting = s.locks.acquire('lapsed', { waitTime: 10_000 });
    const settled = settledFlag(waiting);
    await eventually(async () => (await queueLength('lapsed')) === 1);
    const { token, wakeList } = await firstQueued('lapsed');
    await sleep(400);
    // The message of a hand-off whose lease ran out before it was read: the
    // lock has moved on to the rival since.
    await fixture.redis.rpush(wakeList, `${token}|0|lock:{lapsed}`);
    await sleep(300);
    expect(settled()).toBe(false);
    expect(await fixture.redis.get('lock:{lapsed}')).toBe(blocker.token);
    const blockerFence = await blocker.fence();
    await blocker.release();
    const handle = await waiting;
    expect(handle.lost).toBe(false);
    expect(await fixture.redis.get('lock:{lapsed}')).toBe(handle.token);
    expect(await handle.fence()).toBeGreaterThan(blockerFence);
    await handle.release();
    expectNothingLeft(s.backend);
  });
});
