/** Waiting for a busy key: wake-up by push, giving up, and the order of hand-offs. */
import { LockNotAcquiredError } from '../../src/errors/lock-errors.js';
import type { LockHandle } from '../../src/lock-service/lock-handle.js';
import type { ContractContext } from './backend-contract.js';
import {
  median,
  now,
  rejectionOf,
  settledFlag,
  sleep,
  stopwatch,
} from './contract-support.js';

/**
 * Time for a waiter to be queued in its store before the next step. Ample:
 * CI runs two test files at once on two cores, and a waiter not yet queued
 * when the lock is released makes the order tests fail for the wrong reason.
 */
const queueing = 150;

export function waitingContract(ctx: ContractContext): void {
  ctx.test(
    'hands a released lock to a waiter in another process within a few ms (pushed, not polled)',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const delays: number[] = [];
      // Ping-pong: each round the other process waits, then the holder releases.
      let holder = await a.locks.acquire(name, { leaseTime: 10_000 });
      for (let round = 0; round < 6; round++) {
        const waiter = round % 2 === 0 ? b : a;
        const waiting = waiter.locks.acquire(name, {
          leaseTime: 10_000,
          waitTime: 5000,
        });
        const done = settledFlag(waiting);
        await sleep(queueing);
        expect(done()).toBe(false);
        const releasedAt = now();
        expect(await holder.release()).toBe(true);
        holder = await waiting;
        delays.push(now() - releasedAt);
      }
      await holder.release();
      // A poll every N ms would show up as delays near N; a push arrives in
      // about a round trip (a generous bound for 2 shared cores).
      expect(median(delays)).toBeLessThan(25);
      expect(Math.max(...delays)).toBeLessThan(100);
    },
  );

  ctx.test(
    'hands the key to a waiter as soon as the holder’s lease runs out, without a release',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const sinceAsked = stopwatch();
      const holder = await a.locks.acquire(name, { leaseTime: 300 });
      const waited = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 3000,
      });
      const at = sinceAsked();
      // Never before the holder's lease can have ended, and soon after.
      expect(at).toBeGreaterThanOrEqual(299);
      expect(at).toBeLessThan(300 + 150);
      expect(holder.lost).toBe(true);
      expect(await holder.release()).toBe(false);
      expect(await waited.release()).toBe(true);
    },
  );

  ctx.test(
    'backend: a waiter that queues in the last milliseconds of a lease is served when it runs out',
    async () => {
      const [a, b] = await ctx.processes(2);
      // Leases of 1..12 ms, waiters sent at once: some waiter finds its
      // key busy and queues while its holder's lease has under 1 ms left.
      for (let round = 0; round < 4; round++) {
        const keys = Array.from({ length: 12 }, () => ctx.storeKey(ctx.key()));
        await Promise.all(
          keys.map((key, i) =>
            a.backend.acquire({
              key,
              token: ctx.token(),
              leaseMs: i + 1,
              waitMs: 0,
            }),
          ),
        );
        const elapsed = stopwatch();
        const served = await Promise.all(
          keys.map(async (key) => {
            const token = ctx.token();
            const result = await b.backend.acquire({
              key,
              token,
              leaseMs: 5000,
              waitMs: 400,
            });
            if (result.acquired) await b.backend.release(key, token);
            return result.acquired;
          }),
        );
        expect(served).toEqual(keys.map(() => true));
        expect(elapsed()).toBeLessThan(12 + 150);
      }
    },
  );

  ctx.test(
    'a waiter whose wait ran out is not handed the lock later',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const holder = await a.locks.acquire(name, { leaseTime: 5000 });
      const error = await rejectionOf(
        b.locks.acquire(name, { leaseTime: 5000, waitTime: 100 }),
      );
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(await holder.release()).toBe(true);
      await sleep(50);
      expect(await a.locks.isLocked(name)).toBe(false);
      expect(await b.locks.isLocked(name)).toBe(false);
    },
  );

  ctx.test(
    'an aborted waiter stops waiting at once and is not handed the lock later',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const holder = await a.locks.acquire(name, { leaseTime: 5000 });
      const controller = new AbortController();
      const waiting = b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 5000,
        signal: controller.signal,
      });
      await sleep(queueing);
      const sinceAbort = stopwatch();
      controller.abort();
      const error = await rejectionOf(waiting);
      expect(sinceAbort()).toBeLessThan(100);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(await holder.release()).toBe(true);
      await sleep(50);
      expect(await a.locks.isLocked(name)).toBe(false);
    },
  );

  ctx.test(
    'a release hands the key to the waiter in the same step: a newcomer right after it finds the key busy',
    async () => {
      const [a, b, c] = await ctx.processes(3);
      const name = ctx.key();
      const holder = await a.locks.acquire(name, { leaseTime: 5000 });
      const waiting = b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 3000,
      });
      await sleep(queueing);
      expect(await holder.release()).toBe(true);
      // Not after a turn of the event loop: straight after the release.
      const [byC, byA] = await Promise.all([
        c.locks.tryAcquire(name, { leaseTime: 5000 }),
        a.locks.tryAcquire(name, { leaseTime: 5000 }),
      ]);
      expect(byC).toBeNull();
      expect(byA).toBeNull();
      const handle = await waiting;
      expect(await handle.release()).toBe(true);
    },
  );

  ctx.testIf(
    ctx.capabilities.fifo === 'strict',
    'serves waiters from two processes in arrival order (localHandoffs: 0)',
    async () => {
      const [a, b] = await ctx.processes(2, { localHandoffs: 0 });
      const name = ctx.key();
      const holder = await a.locks.acquire(name, { leaseTime: 10_000 });
      // A first wait opens the process's subscriber (on a Cluster, to the
      // key's shard), which on a loaded machine took longer than the gap
      // between arrivals below: have each process wait once beforehand.
      await Promise.all(
        [a, b].map((p) =>
          p.locks.acquire(name, { leaseTime: 5000, waitTime: 50 }).then(
            () => expect.fail('the key is held'),
            () => undefined,
          ),
        ),
      );
      const order: number[] = [];
      const waiters: Promise<void>[] = [];
      for (let i = 0; i < 8; i++) {
        // Alternating processes, the holder's own included.
        const p = i % 2 === 0 ? b : a;
        waiters.push(
          p.locks.using(name, () => void order.push(i), {
            leaseTime: 5000,
            waitTime: 8000,
          }),
        );
        await sleep(queueing);
      }
      await holder.release();
      await Promise.all(waiters);
      expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    },
  );

  ctx.test(
    'serves every waiter of two processes, one at a time, with the backend’s default hand-off policy',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const holder = await a.locks.acquire(name, { leaseTime: 10_000 });
      let inside = 0;
      let mostInside = 0;
      const served: number[] = [];
      const waiters: Promise<void>[] = [];
      for (let i = 0; i < 10; i++) {
        const p = i % 2 === 0 ? a : b;
        waiters.push(
          p.locks.using(
            name,
            async () => {
              mostInside = Math.max(mostInside, ++inside);
              served.push(i);
              await sleep(2);
              inside -= 1;
            },
            { leaseTime: 5000, waitTime: 8000 },
          ),
        );
        await sleep(5);
      }
      await holder.release();
      await Promise.all(waiters);
      expect(served.toSorted((x, y) => x - y)).toEqual([
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
      ]);
      expect(mostInside).toBe(1);
      expect(await a.locks.isLocked(name)).toBe(false);
    },
  );

  ctx.test(
    'a waiter keeps waiting across several holders until its own turn',
    async () => {
      const [a, b, c] = await ctx.processes(3, { localHandoffs: 0 });
      const name = ctx.key();
      let holder: LockHandle = await a.locks.acquire(name, { leaseTime: 5000 });
      const second = b.locks.acquire(name, { leaseTime: 5000, waitTime: 4000 });
      await sleep(queueing);
      const third = c.locks.acquire(name, { leaseTime: 5000, waitTime: 4000 });
      const thirdDone = settledFlag(third);
      await sleep(queueing);
      await holder.release();
      holder = await second;
      await sleep(queueing);
      // b holds now; c still waits behind it.
      expect(thirdDone()).toBe(false);
      await holder.release();
      holder = await third;
      expect(await holder.release()).toBe(true);
    },
  );
}
