/** Several keys under one token: all or nothing, released together, no deadlock. */
import { LockNotAcquiredError } from '../../src/errors/lock-errors.js';
import type { ContractContext, ContractProcess } from './backend-contract.js';
import { rejectionOf, sleep } from './contract-support.js';

/** Whether `p` sees each of `names` locked, in order. */
function lockedStates(
  p: ContractProcess,
  names: readonly string[],
): Promise<boolean[]> {
  return Promise.all(names.map((name) => p.locks.isLocked(name)));
}

export function multiKeyContract(ctx: ContractContext): void {
  ctx.test(
    'holds every key under one token, in canonical order, and releases them together',
    async () => {
      const [a, b] = await ctx.processes(2);
      const [k1, k2, k3] = [ctx.key('m1'), ctx.key('m2'), ctx.key('m3')];
      const handle = await a.locks.acquire([k3, k1, k2, k1], {
        leaseTime: 5000,
      });
      expect(handle.keys).toEqual([k1, k2, k3]);
      expect(await lockedStates(b, [k1, k2, k3])).toEqual([true, true, true]);
      for (const name of [k1, k2, k3]) {
        expect(await b.locks.tryAcquire(name)).toBeNull();
        // The store has every key under the handle's one token.
        expect(
          await a.backend.extend(ctx.storeKey(name), handle.token, 5000),
        ).toBe(true);
      }
      const fences = await handle.fences();
      expect([...fences.keys()]).toEqual([k1, k2, k3]);
      for (const token of fences.values()) expect(token).toBeGreaterThan(0);

      expect(await handle.release()).toBe(true);
      expect(await lockedStates(b, [k1, k2, k3])).toEqual([
        false,
        false,
        false,
      ]);
    },
  );

  ctx.test(
    'all or nothing: a try-once that finds one key busy takes none of them',
    async () => {
      const [a, b] = await ctx.processes(2);
      const [k1, k2, k3] = [ctx.key('m1'), ctx.key('m2'), ctx.key('m3')];
      const busy = await b.locks.acquire(k2, { leaseTime: 5000 });
      expect(
        await a.locks.tryAcquire([k1, k2, k3], { leaseTime: 5000 }),
      ).toBeNull();
      // Right away, not after a lease: the keys taken before the busy one are back.
      expect(await lockedStates(b, [k1, k2, k3])).toEqual([false, true, false]);
      expect(busy.lost).toBe(false);
      expect(await busy.release()).toBe(true);
    },
  );

  ctx.test(
    'all or nothing: a wait that runs out on one key leaves none held',
    async () => {
      const [a, b] = await ctx.processes(2);
      const [k1, k2, k3] = [ctx.key('m1'), ctx.key('m2'), ctx.key('m3')];
      const busy = await b.locks.acquire(k3, { leaseTime: 5000 });
      const error = await rejectionOf(
        a.locks.acquire([k1, k2, k3], { leaseTime: 5000, waitTime: 150 }),
      );
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect((error as LockNotAcquiredError).key).toBe(k3);
      expect(await lockedStates(b, [k1, k2, k3])).toEqual([false, false, true]);
      await busy.release();
    },
  );

  ctx.test(
    'waits for a busy key within waitTime and then holds them all',
    async () => {
      const [a, b] = await ctx.processes(2);
      const [k1, k2] = [ctx.key('m1'), ctx.key('m2')];
      const busy = await b.locks.acquire(k2, { leaseTime: 5000 });
      setTimeout(() => void busy.release(), 100);
      const handle = await a.locks.acquire([k1, k2], {
        leaseTime: 5000,
        waitTime: 2000,
      });
      expect(await lockedStates(b, [k1, k2])).toEqual([true, true]);
      expect(await handle.release()).toBe(true);
    },
  );

  ctx.test(
    'a waiter for all the keys gets them when a multi-key holder releases',
    async () => {
      const [a, b] = await ctx.processes(2);
      const [k1, k2] = [ctx.key('m1'), ctx.key('m2')];
      const holder = await a.locks.acquire([k1, k2], { leaseTime: 5000 });
      const waiting = b.locks.acquire([k2, k1], {
        leaseTime: 5000,
        waitTime: 3000,
      });
      await sleep(60);
      expect(await holder.release()).toBe(true);
      const handle = await waiting;
      expect(handle.keys).toEqual([k1, k2]);
      expect(await handle.release()).toBe(true);
    },
  );

  ctx.test(
    'never deadlocks: overlapping key sets asked for in opposite orders by two processes',
    async () => {
      const [a, b] = await ctx.processes(2);
      const [x, y, z] = [ctx.key('x'), ctx.key('y'), ctx.key('z')];
      const inside = new Map<string, number>();
      let overlaps = 0;
      const critical = async (names: readonly string[]) => {
        for (const name of names) {
          const count = (inside.get(name) ?? 0) + 1;
          inside.set(name, count);
          if (count > 1) overlaps += 1;
        }
        await sleep(1);
        for (const name of names) inside.set(name, (inside.get(name) ?? 1) - 1);
      };
      const loop = async (
        locks: ContractProcess['locks'],
        sets: readonly (readonly string[])[],
      ) => {
        for (let i = 0; i < 8; i++) {
          const names = sets[i % sets.length];
          await locks.using(names, () => critical(names), {
            leaseTime: 5000,
            waitTime: 5000,
          });
        }
      };
      await Promise.all([
        loop(a.locks, [
          [x, y],
          [x, y, z],
        ]),
        loop(b.locks, [
          [y, x],
          [z, y],
        ]),
        loop(b.locks, [
          [z, x],
          [y, z, x],
        ]),
      ]);
      expect(overlaps).toBe(0);
      expect(await lockedStates(a, [x, y, z])).toEqual([false, false, false]);
    },
  );
}
