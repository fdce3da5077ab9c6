/**
 * Late answers and lost wake-ups: releases answered after their timeout,
 * hand-off messages that arrive late or name another key, clients whose
 * commandTimeout is shorter than the blocking pop.
 */
import { LockBackendError, type LockHandle } from '@app/distributed-lock';
import {
  eventually,
  settledFlag,
  sleep,
} from '../../../../test/support/lock-fixtures.js';
import { blockUntilAnswersArrive } from '../../../../test/support/socket-queue.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength, firstQueued } = fixture;

describe('late answers and lost wake-ups', () => {
  // Local: the release hands the lock over in memory. Remote: the short
  // release declines for the queue, so only its late answer can serve it;
  // otherwise the waiter would wait out the holder's 30 s lease.
  it.each([
    ['wakes the local waiter it handed the lock to', 'local'],
    ['serves a waiter in another process', 'remote'],
  ])('a release answered after its timeout still %s', async (_what, where) => {
    const s = open({ commandTimeoutMs: 200 });
    const waiterSide = where === 'local' ? s : open();
    const key = `late-release-${where}`;
    const holder = await s.locks.acquire(key);
    const waiting = waiterSide.locks.acquire(key, { waitTime: 5_000 });
    await eventually(async () => (await queueLength(key)) === 1);
    await fixture.redis.call('CLIENT', 'PAUSE', '500', 'WRITE');
    expect(await holder.release().catch((e: unknown) => e)).toBeInstanceOf(
      LockBackendError,
    );
    const started = performance.now();
    const next = await waiting;
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(await next.release()).toBe(true);
  });

  it('hand-offs reach a process whose client has a commandTimeout shorter than the blocking pop', async () => {
    const a = open();
    const b = open({ client: { commandTimeout: 300 } });
    const holder = await a.locks.acquire('short-timeout');
    const waiting = b.locks.acquire('short-timeout', { waitTime: 6_000 });
    await sleep(1_300);
    const started = performance.now();
    await holder.release();
    const next = await waiting;
    expect(performance.now() - started).toBeLessThan(500);
    await next.release();
  });

  it('a late hand-off message never frees the lock its token holds now', async () => {
    const s = open();
    const rival = open();
    // Something else keeps the process listening.
    const blocker = await rival.locks.acquire('stale:other');
    const listening = s.locks
      .acquire('stale:other', { waitTime: 5_000 })
      .catch((error: unknown) => error);
    await eventually(async () => (await queueLength('stale:other')) === 1);
    const { wakeList } = await firstQueued('stale:other');

    // The token holds the key anew (say it was queued again after an earlier
    // hand-off lapsed); the message of that earlier hand-off arrives only now.
    const held = await s.locks.acquire('stale:k');
    const heldFence = await held.fence();
    await fixture.redis.rpush(
      wakeList,
      `${held.token}|${heldFence - 1}|lock:{stale:k}`,
    );
    await eventually(async () => (await fixture.redis.llen(wakeList)) === 0);
    await sleep(100);
    expect(await fixture.redis.get('lock:{stale:k}')).toBe(held.token);
    expect(held.lost).toBe(false);
    expect(await held.release()).toBe(true);
    await blocker.release();
    await ((await listening) as LockHandle).release();
  });

  it('a message about one key is never taken as the grant of another key of the same acquisition', async () => {
    const s = open();
    const rival = open();
    const blocker = await rival.locks.acquire('mk:b');
    const both = s.locks.acquire(['mk:a', 'mk:b'], { waitTime: 3_000 });
    const settled = settledFlag(both);
    await eventually(async () => (await queueLength('mk:b')) === 1);
    const { token, wakeList } = await firstQueued('mk:b');
    expect(await fixture.redis.get('lock:{mk:a}')).toBe(token);

    // A late message about key a (from an older hand-off of a to this token).
    await fixture.redis.rpush(wakeList, `${token}|0|lock:{mk:a}`);
    await eventually(async () => (await fixture.redis.llen(wakeList)) === 0);
    await sleep(100);
    expect(settled()).toBe(false);
    expect(await fixture.redis.get('lock:{mk:b}')).toBe(blocker.token);
    expect(await fixture.redis.get('lock:{mk:a}')).toBe(token);

    await blocker.release();
    const handle = await both;
    expect(await fixture.redis.get('lock:{mk:b}')).toBe(handle.token);
    expect(await handle.release()).toBe(true);
  });

  it("an answer read after the process's own stall is not taken for a timeout", async () => {
    const s = open({ commandTimeoutMs: 50 });
    const held = await s.locks.acquire('stalled-caller');
    const inFlight = s.client.commandQueue.length;
    const releasing = held.release();
    // Let the call reach the socket (microtasks only: nothing is read yet).
    for (let i = 0; i < 20 && s.client.commandQueue.length === inFlight; i++)
      await Promise.resolve();
    expect(s.client.commandQueue.length).toBeGreaterThan(inFlight);
    // Sent beside another call, it waits in the socket's cork until the
    // turn's end (see write-coalescing.ts).
    await new Promise((resolve) => process.nextTick(resolve));
    // Redis answers at once; this process reads nothing until the block
    // ends, and by then the call's deadline is overdue too.
    blockUntilAnswersArrive(200, [s.client]);
    expect(await releasing).toBe(true);
    expect(await fixture.redis.call('EXISTS', 'lock:{stalled-caller}')).toBe(0);
  });
});
