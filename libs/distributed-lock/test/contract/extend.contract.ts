/** Extend: by the owner only, and never once the lock is gone; the watchdog. */
import type { ContractContext } from './backend-contract.js';
import { sleep } from './contract-support.js';

export function extendContract(ctx: ContractContext): void {
  ctx.test(
    'handle.extend() keeps the lock past its original lease',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, { leaseTime: 200 });
      await sleep(50);
      expect(await handle.extend(1000)).toBe(true);
      await sleep(300);
      // Well past the first lease: still held.
      expect(handle.lost).toBe(false);
      expect(handle.signal.aborted).toBe(false);
      expect(await b.locks.tryAcquire(name, { leaseTime: 5000 })).toBeNull();
      expect(await handle.release()).toBe(true);
    },
  );

  ctx.test(
    'backend: extend sets the remaining lease, a shorter one too',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const token = ctx.token();
      await a.backend.acquire({ key, token, leaseMs: 10_000, waitMs: 0 });
      expect(await a.backend.extend(key, token, 100)).toBe(true);
      await sleep(200);
      expect(await b.backend.isLocked(key)).toBe(false);
      const next = await b.backend.acquire({
        key,
        token: ctx.token(),
        leaseMs: 5000,
        waitMs: 0,
      });
      expect(next.acquired).toBe(true);
    },
  );

  ctx.test(
    'backend: a stranger’s extend resolves false and leaves the owner’s lease as it was',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const owner = ctx.token();
      await a.backend.acquire({ key, token: owner, leaseMs: 250, waitMs: 0 });
      expect(await b.backend.extend(key, ctx.token(), 10_000)).toBe(false);
      expect(await a.backend.extend(key, ctx.token(), 10_000)).toBe(false);
      await sleep(350);
      // Not extended: the owner's lease ran out as set.
      expect(await a.backend.isLocked(key)).toBe(false);
    },
  );

  ctx.test(
    'backend: extend after the lease ran out resolves false and does not bring the lock back',
    async () => {
      const [a] = await ctx.processes(1);
      const key = ctx.storeKey(ctx.key());
      const token = ctx.token();
      await a.backend.acquire({ key, token, leaseMs: 100, waitMs: 0 });
      await sleep(200);
      expect(await a.backend.extend(key, token, 5000)).toBe(false);
      expect(await a.backend.isLocked(key)).toBe(false);
    },
  );

  ctx.test(
    'backend: extend after another owner took the key resolves false and leaves it theirs',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const first = ctx.token();
      const second = ctx.token();
      await a.backend.acquire({ key, token: first, leaseMs: 100, waitMs: 0 });
      const next = await b.backend.acquire({
        key,
        token: second,
        leaseMs: 300,
        waitMs: 1000,
      });
      expect(next.acquired).toBe(true);
      expect(await a.backend.extend(key, first, 10_000)).toBe(false);
      // The new owner's own lease (300 ms) still rules.
      await sleep(400);
      expect(await b.backend.isLocked(key)).toBe(false);
    },
  );

  ctx.test(
    'handle.extend() after the lease ran out resolves false and the handle is lost',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, { leaseTime: 100 });
      const next = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 1000,
      });
      expect(await handle.extend(5000)).toBe(false);
      expect(handle.lost).toBe(true);
      expect(handle.signal.aborted).toBe(true);
      expect(await next.extend(5000)).toBe(true);
      expect(await next.release()).toBe(true);
    },
  );

  ctx.test(
    'a watchdog keeps renewing a lock acquired without leaseTime while its holder runs',
    async () => {
      const [a, b] = await ctx.processes(2, { watchdogLeaseTime: 300 });
      const name = ctx.key();
      const handle = await a.locks.acquire(name);
      await sleep(900);
      expect(handle.lost).toBe(false);
      expect(await b.locks.tryAcquire(name)).toBeNull();
      expect(await handle.release()).toBe(true);
      expect(await b.locks.isLocked(name)).toBe(false);
      expect(a.lost).toEqual([]);
    },
  );
}
