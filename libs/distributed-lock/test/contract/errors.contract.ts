/** Errors: busy after waiting, bad keys, a closed backend, an unreachable store. */
import {
  LockBackendError,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
} from '../../src/errors/lock-errors.js';
import { isLockError } from '../../src/lock-service/lock.service.js';
import type { ContractContext } from './backend-contract.js';
import {
  aborted,
  eventually,
  maxKeyLength,
  rejectionOf,
  sleep,
  stopwatch,
} from './contract-support.js';

export function errorsContract(ctx: ContractContext): void {
  ctx.test(
    'LockNotAcquiredError once waitTime ran out, with the key, the wait and the holder’s remaining lease',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      await b.locks.acquire(name, { leaseTime: 2000 });
      const sinceHeld = stopwatch();
      const error = await rejectionOf(
        a.locks.acquire(name, { leaseTime: 5000, waitTime: 200 }),
      );
      const elapsed = sinceHeld();
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(isLockError(error)).toBe(true);
      const busy = error as LockNotAcquiredError;
      expect(busy.code).toBe('LOCK_NOT_ACQUIRED');
      expect(busy.key).toBe(name);
      expect(elapsed).toBeGreaterThanOrEqual(199);
      expect(elapsed).toBeLessThan(200 + 150);
      expect(busy.waitedMs).toBeGreaterThanOrEqual(199);
      expect(busy.retryAfterMs).toBeDefined();
      expect(busy.retryAfterMs).toBeLessThanOrEqual(2000 - 199 + 2);
      expect(busy.retryAfterMs).toBeGreaterThan(2000 - elapsed - 200);
    },
  );

  ctx.test(
    'waitTime 0 tries once: acquire rejects at once with the retry hint, tryAcquire resolves null',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      await b.locks.acquire(name, { leaseTime: 3000 });
      const elapsed = stopwatch();
      const error = await rejectionOf(
        a.locks.acquire(name, { leaseTime: 5000, waitTime: 0 }),
      );
      expect(elapsed()).toBeLessThan(150);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(
        2000,
      );
      expect(await a.locks.tryAcquire(name)).toBeNull();
    },
  );

  ctx.test(
    'LockKeyError for a bad key, from every entry point, and nothing is locked',
    async () => {
      const [a, b] = await ctx.processes(2);
      const good = ctx.key();
      const bad = [
        '',
        'a{b}',
        'tab\there',
        'lone\ud800',
        'k'.repeat(maxKeyLength + 1),
      ];
      for (const key of bad) {
        const errors = await Promise.all(
          [
            a.locks.acquire(key, { leaseTime: 5000 }),
            a.locks.tryAcquire(key, { leaseTime: 5000 }),
            a.locks.using(key, () => undefined, { leaseTime: 5000 }),
            a.locks.acquire([good, key], { leaseTime: 5000 }),
            a.locks.isLocked(key),
          ].map(rejectionOf),
        );
        for (const error of errors) {
          expect(error).toBeInstanceOf(LockKeyError);
          expect((error as LockKeyError).code).toBe('LOCK_KEY_INVALID');
        }
      }
      expect(await b.locks.isLocked(good)).toBe(false);
      const taken = await b.locks.tryAcquire(good, { leaseTime: 5000 });
      expect(taken).not.toBeNull();
      await taken?.release();
    },
  );

  ctx.test(
    'a closed backend rejects every call with LockBackendError; closing again is harmless',
    async () => {
      const [a] = await ctx.processes(1);
      const key = ctx.storeKey(ctx.key());
      const token = ctx.token();
      await a.backend.close();
      await a.backend.close();
      for (const call of [
        () => a.backend.acquire({ key, token, leaseMs: 1000, waitMs: 0 }),
        () => a.backend.acquire({ key, token, leaseMs: 1000, waitMs: 1000 }),
        () => a.backend.extend(key, token, 1000),
        () => a.backend.release(key, token),
        () => a.backend.fence(key, token),
        () => a.backend.isLocked(key),
      ]) {
        expect(await rejectionOf(call())).toBeInstanceOf(LockBackendError);
      }
    },
  );

  ctx.test(
    'closing a process’s backend sends its waiters away as not acquired, at once',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const holder = await a.locks.acquire(name, { leaseTime: 5000 });
      const waiting = rejectionOf(
        b.locks.acquire(name, { leaseTime: 5000, waitTime: 5000 }),
      );
      await sleep(60);
      const elapsed = stopwatch();
      await b.backend.close();
      const error = await waiting;
      expect(elapsed()).toBeLessThan(500);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      if (!ctx.capabilities.sharedInstance) {
        // Another process's lock is its own business.
        expect(holder.lost).toBe(false);
        expect(await holder.extend(5000)).toBe(true);
        expect(await holder.release()).toBe(true);
        expect(await a.locks.isLocked(name)).toBe(false);
      }
    },
  );

  ctx.test(
    'a closed service refuses new acquisitions as not acquired, without touching the store',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      await a.locks.close();
      const error = await rejectionOf(a.locks.acquire(name));
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(await a.locks.tryAcquire(name)).toBeNull();
      if (!ctx.capabilities.sharedInstance)
        expect(await b.locks.isLocked(name)).toBe(false);
    },
  );

  ctx.testIf(
    ctx.capabilities.unreachable,
    'an unreachable store: calls fail with LockBackendError in bounded time, a watchdog hold is lost, and all is well once it is back',
    async () => {
      const [a, b] = await ctx.processes(2, { watchdogLeaseTime: 600 });
      const name = ctx.key();
      const held = await a.locks.acquire(name);
      const waiting = b.locks.acquire(name, { waitTime: 400 });
      const waitingError = rejectionOf(waiting);
      await sleep(60);
      const restore = await ctx.cutOff();
      const sinceCut = stopwatch();
      const lostAfter = aborted(held.signal).then((reason) => ({
        reason,
        at: sinceCut(),
      }));

      const other = ctx.key();
      for (const call of [
        () => b.locks.acquire(other, { waitTime: 0 }),
        () => b.locks.acquire(other, { waitTime: 300 }),
        () => b.locks.tryAcquire(other),
        () => b.locks.isLocked(other),
        () => b.backend.release(ctx.storeKey(name), ctx.token()),
      ]) {
        const elapsed = stopwatch();
        expect(await rejectionOf(call())).toBeInstanceOf(LockBackendError);
        // Bounded: the store's call timeout, not a hang.
        expect(elapsed()).toBeLessThan(2500);
      }
      // The waiter could not be served, nor be told it was not: an error.
      expect(await waitingError).toBeInstanceOf(LockBackendError);

      // Renewals fail: the hold is lost by its lease, not later.
      const { reason, at } = await lostAfter;
      expect(at).toBeLessThan(600 + 100);
      expect(reason).toBeInstanceOf(LockLostError);
      expect(a.lost.map((event) => event.reason)).toEqual(['renewal-failed']);

      await restore();
      await eventually(async () => {
        const handle = await b.locks
          .tryAcquire(name, { leaseTime: 5000 })
          .catch(() => null);
        if (handle) await handle.release();
        return handle !== null;
      }, 8000);
    },
  );
}
