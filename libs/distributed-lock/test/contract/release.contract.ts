/** Release: by the owner only, once. */
import type { ContractContext } from './backend-contract.js';
import { rejectionOf, sleep } from './contract-support.js';

export function releaseContract(ctx: ContractContext): void {
  ctx.test('frees the key: another process takes it at once', async () => {
    const [a, b] = await ctx.processes(2);
    const name = ctx.key();
    const handle = await a.locks.acquire(name, { leaseTime: 5000 });
    expect(await handle.release()).toBe(true);
    const next = await b.locks.tryAcquire(name, { leaseTime: 5000 });
    expect(next).not.toBeNull();
    expect(await next?.release()).toBe(true);
  });

  ctx.test(
    'backend: only the owner’s token releases; a stranger’s release resolves false and touches nothing',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const owner = ctx.token();
      const granted = await a.backend.acquire({
        key,
        token: owner,
        leaseMs: 5000,
        waitMs: 0,
      });
      expect(granted.acquired).toBe(true);
      // From another process, and from the owner's own process.
      expect(await b.backend.release(key, ctx.token())).toBe(false);
      expect(await a.backend.release(key, ctx.token())).toBe(false);
      expect(await b.backend.isLocked(key)).toBe(true);
      const busy = await b.backend.acquire({
        key,
        token: ctx.token(),
        leaseMs: 5000,
        waitMs: 0,
      });
      expect(busy.acquired).toBe(false);
      expect(await a.backend.release(key, owner)).toBe(true);
      expect(await b.backend.isLocked(key)).toBe(false);
    },
  );

  ctx.test(
    'backend: a second release resolves false, and so does releasing a key nobody holds',
    async () => {
      const [a] = await ctx.processes(1);
      const key = ctx.storeKey(ctx.key());
      const token = ctx.token();
      await a.backend.acquire({ key, token, leaseMs: 5000, waitMs: 0 });
      expect(await a.backend.release(key, token)).toBe(true);
      expect(await a.backend.release(key, token)).toBe(false);
      expect(
        await a.backend.release(ctx.storeKey(ctx.key()), ctx.token()),
      ).toBe(false);
    },
  );

  ctx.test(
    'backend: a second release does not free the next owner’s lock',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const first = ctx.token();
      const second = ctx.token();
      await a.backend.acquire({ key, token: first, leaseMs: 5000, waitMs: 0 });
      expect(await a.backend.release(key, first)).toBe(true);
      const next = await b.backend.acquire({
        key,
        token: second,
        leaseMs: 5000,
        waitMs: 0,
      });
      expect(next.acquired).toBe(true);
      expect(await a.backend.release(key, first)).toBe(false);
      expect(await a.backend.isLocked(key)).toBe(true);
      expect(await b.backend.extend(key, second, 5000)).toBe(true);
      expect(await b.backend.release(key, second)).toBe(true);
    },
  );

  ctx.test(
    'handle.release() twice answers the first result and never frees the next holder',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, { leaseTime: 5000 });
      expect(await handle.release()).toBe(true);
      const next = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 0,
      });
      expect(await handle.release()).toBe(true);
      expect(next.lost).toBe(false);
      expect(await a.locks.isLocked(name)).toBe(true);
      expect(await next.extend(5000)).toBe(true);
      expect(await next.release()).toBe(true);
    },
  );

  ctx.test(
    'a release after the lease ran out resolves false and leaves the new holder alone',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const stale = await a.locks.acquire(name, { leaseTime: 150 });
      const next = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 1000,
      });
      expect(await stale.release()).toBe(false);
      expect(await b.locks.isLocked(name)).toBe(true);
      expect(await next.extend(5000)).toBe(true);
      expect(await next.release()).toBe(true);
    },
  );

  ctx.test(
    'a release after the lease ran out resolves false when nobody took the key either',
    async () => {
      const [a] = await ctx.processes(1);
      const name = ctx.key();
      const stale = await a.locks.acquire(name, { leaseTime: 100 });
      await sleep(200);
      expect(await stale.release()).toBe(false);
      expect(await a.locks.isLocked(name)).toBe(false);
    },
  );

  ctx.test(
    'using() releases when the callback throws, and rethrows',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const failure = new Error('inside the lock');
      const error = await rejectionOf(
        a.locks.using(
          name,
          async () => {
            expect(await b.locks.isLocked(name)).toBe(true);
            throw failure;
          },
          { leaseTime: 5000 },
        ),
      );
      expect(error).toBe(failure);
      expect(await b.locks.isLocked(name)).toBe(false);
    },
  );
}
