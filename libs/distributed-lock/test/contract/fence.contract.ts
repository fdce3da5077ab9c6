/** Fencing tokens: strictly increasing across holders and processes, never for a lost lock. */
import type { LockGrant } from '../../src/backends/lock-backend.js';
import { LockLostError } from '../../src/errors/lock-errors.js';
import type { LockHandle } from '../../src/lock-service/lock-handle.js';
import { FencedResource } from '../../../../test/support/fenced-resource.js';
import type { ContractContext } from './backend-contract.js';
import { aborted, sleep, strictlyIncreasing } from './contract-support.js';

/**
 * What a handle that no longer holds its lock answers to fence(): the
 * service rejects with LockLostError unless a token was issued while it held
 * the lock (with the grant, or by an earlier fence()), which it repeats.
 */
async function fenceAfterLoss(handle: LockHandle): Promise<number | Error> {
  return handle.fence().catch((error: unknown) => error as Error);
}

export function fenceContract(ctx: ContractContext): void {
  ctx.test(
    'issues a positive integer token, which the same handle repeats',
    async () => {
      const [a] = await ctx.processes(1);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, { leaseTime: 5000 });
      const token = await handle.fence();
      expect(Number.isSafeInteger(token)).toBe(true);
      expect(token).toBeGreaterThan(0);
      expect(await handle.fence()).toBe(token);
      expect(await handle.fences()).toEqual(new Map([[name, token]]));
      await handle.release();
    },
  );

  ctx.test('strictly increases across holders in two processes', async () => {
    const [a, b] = await ctx.processes(2);
    const name = ctx.key();
    const tokens: number[] = [];
    for (let i = 0; i < 8; i++) {
      const p = i % 3 === 0 ? a : b;
      await p.locks.using(
        name,
        async (lock) => void tokens.push(await lock.fence()),
        { leaseTime: 5000 },
      );
    }
    expect(strictlyIncreasing(tokens)).toBe(true);
  });

  ctx.test(
    'strictly increases across holders that queued for the key',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const tokens: number[] = [];
      const holds = Array.from({ length: 6 }, (_, i) =>
        (i % 2 === 0 ? a : b).locks.using(
          name,
          async (lock) => {
            tokens.push(await lock.fence());
            await sleep(2);
          },
          { leaseTime: 5000, waitTime: 5000 },
        ),
      );
      await Promise.all(holds);
      expect(tokens).toHaveLength(6);
      expect(strictlyIncreasing(tokens)).toBe(true);
    },
  );

  ctx.test(
    'a holder whose lease ran out is fenced off: the next holder’s token is higher, and its stale write is rejected',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const resource = new FencedResource();
      const stale = await a.locks.acquire(name, { leaseTime: 150 });
      const staleToken = await stale.fence();
      expect(resource.write(staleToken, 'a')).toBe(true);
      await aborted(stale.signal);
      const next = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 1000,
      });
      const nextToken = await next.fence();
      expect(nextToken).toBeGreaterThan(staleToken);
      expect(resource.write(nextToken, 'b')).toBe(true);
      // The stale holder wakes up and writes with what it has.
      expect(resource.write(await stale.fence(), 'a')).toBe(false);
      expect(resource.acceptedTokens).toEqual([staleToken, nextToken]);
      await next.release();
    },
  );

  ctx.test(
    'after a loss or a release, fence() rejects with LockLostError or repeats a token below the next holder’s',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      // Never asked for a token while held.
      const expired = await a.locks.acquire(name, { leaseTime: 100 });
      await aborted(expired.signal);
      const released = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 1000,
      });
      await released.release();
      const last = await a.locks.acquire(name, { leaseTime: 5000 });
      const lastToken = await last.fence();
      for (const handle of [expired, released]) {
        const answer = await fenceAfterLoss(handle);
        if (answer instanceof Error) {
          expect(answer).toBeInstanceOf(LockLostError);
        } else {
          expect(answer).toBeLessThan(lastToken);
        }
      }
      await last.release();
    },
  );

  ctx.test(
    'backend: fence for a token that does not hold the key resolves undefined',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const first = ctx.token();
      expect(await a.backend.fence(key, first)).toBeUndefined();
      await a.backend.acquire({ key, token: first, leaseMs: 100, waitMs: 0 });
      const firstToken = await a.backend.fence(key, first);
      expect(firstToken).toBeGreaterThan(0);
      // A stranger, while the key is held.
      expect(await b.backend.fence(key, ctx.token())).toBeUndefined();
      await sleep(200);
      // The owner, once its lease ran out.
      expect(await a.backend.fence(key, first)).toBeUndefined();
      const second = ctx.token();
      await b.backend.acquire({ key, token: second, leaseMs: 5000, waitMs: 0 });
      const secondToken = await b.backend.fence(key, second);
      expect(secondToken).toBeGreaterThan(firstToken!);
      expect(await b.backend.release(key, second)).toBe(true);
      // The owner, once it released.
      expect(await b.backend.fence(key, second)).toBeUndefined();
    },
  );

  ctx.test(
    'backend: tokens of grants (a hand-off included) and of fence() increase together across owners',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const first = ctx.token();
      const second = ctx.token();
      const grantA = (await a.backend.acquire({
        key,
        token: first,
        leaseMs: 5000,
        waitMs: 0,
      })) as LockGrant;
      const fenceA = (await a.backend.fence(key, first))!;
      expect(fenceA).toBeGreaterThanOrEqual(grantA.fencingToken ?? 1);
      // The same holder asking again never goes back.
      const againA = (await a.backend.fence(key, first))!;
      expect(againA).toBeGreaterThanOrEqual(fenceA);

      const waiting = b.backend.acquire({
        key,
        token: second,
        leaseMs: 5000,
        waitMs: 3000,
      });
      await sleep(60);
      expect(await a.backend.release(key, first)).toBe(true);
      const grantB = (await waiting) as LockGrant;
      expect(grantB.acquired).toBe(true);
      if (grantB.fencingToken !== undefined)
        expect(grantB.fencingToken).toBeGreaterThan(againA);
      const fenceB = (await b.backend.fence(key, second))!;
      expect(fenceB).toBeGreaterThan(againA);
      expect(fenceB).toBeGreaterThanOrEqual(grantB.fencingToken ?? fenceB);
      expect(await b.backend.release(key, second)).toBe(true);
    },
  );
}
