/** `fence: true`: every key's fencing token is there when acquire resolves. */
import type { LockHandle } from '../../src/lock-service/lock-handle.js';
import type { ContractContext, ContractProcess } from './backend-contract.js';
import { sleep, strictlyIncreasing } from './contract-support.js';

/** The handle's token, failing the test when it has none yet. */
function tokenOf(handle: LockHandle): number {
  const token = handle.fencingToken;
  if (token === undefined) throw new Error('the handle came without a token');
  return token;
}

/** Counts the backend's fence calls from now on; the calls still go through. */
function countFenceCalls(p: ContractProcess): () => number {
  const spy = vi.spyOn(p.backend, 'fence');
  return () => spy.mock.calls.length;
}

export function fenceWithGrantContract(ctx: ContractContext): void {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  ctx.test(
    'the handle has its token at once, and fence() repeats it without asking the store',
    async () => {
      const [a] = await ctx.processes(1);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, {
        leaseTime: 5000,
        fence: true,
      });
      const token = tokenOf(handle);
      expect(Number.isSafeInteger(token)).toBe(true);
      expect(token).toBeGreaterThan(0);
      const fenceCalls = countFenceCalls(a);
      expect(await handle.fence()).toBe(token);
      expect(await handle.fences()).toEqual(new Map([[name, token]]));
      expect(fenceCalls()).toBe(0);
      await handle.release();
    },
  );

  ctx.test(
    'tokens strictly increase across holders: try-once, waiters handed the lock (in another process and in the same one), reentrant holds',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const options = { leaseTime: 5000, waitTime: 3000, fence: true };
      const tokens: number[] = [];

      const first = await a.locks.acquire(name, { ...options, waitTime: 0 });
      tokens.push(tokenOf(first));
      const handedOver = b.locks.acquire(name, options);
      await sleep(50);
      await first.release();
      const second = await handedOver;
      tokens.push(tokenOf(second));

      // A reentrant hold shares its outer hold's token.
      const inner = await second.run(() => b.locks.acquire(name, options));
      expect(inner.reentrant).toBe(true);
      expect(tokenOf(inner)).toBe(tokenOf(second));
      await inner.release();

      // A waiter in the same process as the holder.
      const sameProcess = b.locks.acquire(name, options);
      await sleep(50);
      await second.release();
      const third = await sameProcess;
      tokens.push(tokenOf(third));
      await third.release();

      // A reentrant fenced hold inside an unfenced one issues the token the
      // outer hold had not asked for, and the two share it.
      const unfenced = await a.locks.acquire(name, { leaseTime: 5000 });
      const fencedInside = await unfenced.run(() =>
        a.locks.acquire(name, options),
      );
      tokens.push(tokenOf(fencedInside));
      expect(unfenced.fencingToken).toBe(tokenOf(fencedInside));
      expect(await unfenced.fence()).toBe(tokenOf(fencedInside));
      await fencedInside.release();
      await unfenced.release();

      const last = await b.locks.acquire(name, options);
      tokens.push(tokenOf(last));
      await last.release();
      expect(strictlyIncreasing(tokens)).toBe(true);
    },
  );

  ctx.test(
    'several keys: each has its token when acquire resolves, also the one the chain held already',
    async () => {
      const [a] = await ctx.processes(1);
      const [k1, k2, k3] = [ctx.key('f1'), ctx.key('f2'), ctx.key('f3')];
      const outer = await a.locks.acquire(k2, { leaseTime: 5000 });
      const handle = await outer.run(() =>
        a.locks.acquire([k3, k1, k2], { leaseTime: 5000, fence: true }),
      );
      const fenceCalls = countFenceCalls(a);
      const fences = await handle.fences();
      expect(fenceCalls()).toBe(0);
      expect([...fences.keys()]).toEqual([k1, k2, k3]);
      for (const token of fences.values()) {
        expect(Number.isSafeInteger(token)).toBe(true);
        expect(token).toBeGreaterThan(0);
      }
      expect(handle.fencingToken).toBe(fences.get(k1));
      expect(outer.fencingToken).toBe(fences.get(k2));
      await handle.release();
      await outer.release();

      const next = await a.locks.acquire([k1, k2, k3], {
        leaseTime: 5000,
        fence: true,
      });
      const nextFences = await next.fences();
      for (const name of [k1, k2, k3])
        expect(nextFences.get(name)).toBeGreaterThan(fences.get(name)!);
      await next.release();
    },
  );
}
