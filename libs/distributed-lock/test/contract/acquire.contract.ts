/** Taking a free key, and trying once to take a busy one. */
import type { LockGrant } from '../../src/backends/lock-backend.js';
import type { ContractContext } from './backend-contract.js';
import { sleep, stopwatch } from './contract-support.js';

export function acquireContract(ctx: ContractContext): void {
  ctx.test(
    'takes a free key, which every process then sees locked until it is released',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      expect(await b.locks.isLocked(name)).toBe(false);
      const handle = await a.locks.acquire(name, { leaseTime: 5000 });
      expect(handle.keys).toEqual([name]);
      expect(handle.reentrant).toBe(false);
      expect(Buffer.from(handle.token, 'base64url').length).toBe(16);
      expect(handle.lost).toBe(false);
      expect(await a.locks.isLocked(name)).toBe(true);
      expect(await b.locks.isLocked(name)).toBe(true);
      expect(await handle.release()).toBe(true);
      expect(await a.locks.isLocked(name)).toBe(false);
      expect(await b.locks.isLocked(name)).toBe(false);
    },
  );

  ctx.test(
    'excludes another process: its tryAcquire answers null without waiting',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, { leaseTime: 5000 });
      const elapsed = stopwatch();
      expect(await b.locks.tryAcquire(name, { leaseTime: 5000 })).toBeNull();
      expect(elapsed()).toBeLessThan(200);
      // The holder is untouched.
      expect(handle.lost).toBe(false);
      expect(await handle.release()).toBe(true);
      const taken = await b.locks.tryAcquire(name, { leaseTime: 5000 });
      expect(taken).not.toBeNull();
      expect(await taken?.release()).toBe(true);
    },
  );

  ctx.test(
    'excludes another caller of the same process outside the holder’s call chain',
    async () => {
      const [a] = await ctx.processes(1);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, { leaseTime: 5000 });
      expect(await a.locks.tryAcquire(name, { leaseTime: 5000 })).toBeNull();
      await handle.release();
    },
  );

  ctx.test(
    'keeps keys independent: holding one does not block another',
    async () => {
      const [a, b] = await ctx.processes(2);
      const first = await a.locks.acquire(ctx.key(), { leaseTime: 5000 });
      const second = await b.locks.tryAcquire(ctx.key(), { leaseTime: 5000 });
      expect(second).not.toBeNull();
      expect(await second?.release()).toBe(true);
      expect(await first.release()).toBe(true);
    },
  );

  ctx.test(
    'is reentrant within the holder’s call chain only, and frees the key with the outermost hold',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      await a.locks.using(
        name,
        async (outer) => {
          const inner = await a.locks.acquire(name, { waitTime: 0 });
          expect(inner.reentrant).toBe(true);
          expect(inner.token).toBe(outer.token);
          expect(await inner.release()).toBe(true);
          // The outer hold still has it.
          expect(await b.locks.isLocked(name)).toBe(true);
          expect(await b.locks.tryAcquire(name)).toBeNull();
        },
        { leaseTime: 5000 },
      );
      expect(await b.locks.isLocked(name)).toBe(false);
    },
  );

  ctx.test(
    'backend: grants a free key with no more lease than it can have, and a positive integer fencing token if any',
    async () => {
      const [a] = await ctx.processes(1);
      const key = ctx.storeKey(ctx.key());
      const token = ctx.token();
      const elapsed = stopwatch();
      const result = await a.backend.acquire({
        key,
        token,
        leaseMs: 2000,
        waitMs: 0,
      });
      const took = elapsed();
      expect(result.acquired).toBe(true);
      const grant = result as LockGrant;
      // Counted from the call, and set during it: it cannot outlast the
      // call's own time plus the lease asked for.
      expect(grant.leaseMs).toBeGreaterThan(0);
      expect(grant.leaseMs).toBeLessThanOrEqual(2000 + took);
      if (grant.fencingToken !== undefined) {
        expect(Number.isSafeInteger(grant.fencingToken)).toBe(true);
        expect(grant.fencingToken).toBeGreaterThan(0);
      }
      expect(await a.backend.isLocked(key)).toBe(true);
      expect(await a.backend.release(key, token)).toBe(true);
      expect(await a.backend.isLocked(key)).toBe(false);
    },
  );

  ctx.test(
    'backend: a try-once on a busy key resolves busy at once, with the holder’s remaining lease as retryAfterMs',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const owner = ctx.token();
      const leaseMs = 1000;
      const held = await a.backend.acquire({
        key,
        token: owner,
        leaseMs,
        waitMs: 0,
      });
      expect(held.acquired).toBe(true);
      const sinceGrant = stopwatch();
      await sleep(150);
      const gap = sinceGrant();
      const elapsed = stopwatch();
      const busy = await b.backend.acquire({
        key,
        token: ctx.token(),
        leaseMs,
        waitMs: 0,
      });
      expect(elapsed()).toBeLessThan(200);
      expect(busy.acquired).toBe(false);
      const retryAfterMs = (busy as { retryAfterMs?: number }).retryAfterMs;
      expect(retryAfterMs).toBeDefined();
      // What is left of the holder's lease: at most the lease less the time
      // since it was granted (rounded up), and not far less.
      expect(retryAfterMs).toBeLessThanOrEqual(leaseMs - gap + 2);
      expect(retryAfterMs).toBeGreaterThan(leaseMs - gap - 200);
      // The holder still holds, with its own token.
      expect(await a.backend.extend(key, owner, leaseMs)).toBe(true);
      expect(await a.backend.release(key, owner)).toBe(true);
    },
  );
}
