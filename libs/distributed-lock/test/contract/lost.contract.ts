/** A lock lost while held: handle.lost, the signal, the `lost` event, and the next holder. */
import { LockLostError } from '../../src/errors/lock-errors.js';
import type { ContractContext } from './backend-contract.js';
import { aborted, eventually, sleep, stopwatch } from './contract-support.js';

export function lostContract(ctx: ContractContext): void {
  ctx.test(
    'a lease that runs out without a watchdog: lost, signal aborted, one lost event; another process then takes the key',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const sinceAsked = stopwatch();
      const handle = await a.locks.acquire(name, { leaseTime: 250 });
      const signal = handle.signal;
      await sleep(100);
      expect(handle.lost).toBe(false);
      expect(signal.aborted).toBe(false);
      expect(a.lost).toEqual([]);

      const reason = await aborted(signal);
      const at = sinceAsked();
      // Told a little before the store can free it (a clock drift allowance),
      // give or take a late timer on a busy machine.
      expect(at).toBeLessThan(250 + 30);
      expect(at).toBeGreaterThan(200);
      expect(reason).toBeInstanceOf(LockLostError);
      expect((reason as LockLostError).key).toBe(name);
      expect(handle.lost).toBe(true);
      expect(a.lost).toEqual([
        expect.objectContaining({
          key: name,
          token: handle.token,
          reason: 'lease-expired',
        }),
      ]);

      const next = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 500,
      });
      expect(sinceAsked()).toBeLessThan(250 + 200);
      await sleep(100);
      expect(a.lost).toHaveLength(1);
      expect(await handle.release()).toBe(false);
      expect(next.lost).toBe(false);
      expect(await next.release()).toBe(true);
    },
  );

  ctx.test(
    'a lock the store gave to another owner early is reported taken-over at the holder’s next renewal',
    async () => {
      const [a, b] = await ctx.processes(2, { watchdogLeaseTime: 600 });
      const name = ctx.key();
      const handle = await a.locks.acquire(name);
      // The store ends the holder's lease at once (as a failover or an
      // eviction might), and another process takes the key. (A quorum
      // backend answers false at once: 1 ms leaves it no validity.)
      await a.backend.extend(ctx.storeKey(name), handle.token, 1);
      await sleep(20);
      const next = await b.locks.acquire(name, { waitTime: 500 });
      expect(handle.lost).toBe(false);
      // The watchdog renews every 200 ms and finds the key gone.
      const reason = await aborted(handle.signal);
      expect(reason).toBeInstanceOf(LockLostError);
      expect(a.lost).toEqual([
        expect.objectContaining({
          key: name,
          token: handle.token,
          reason: 'taken-over',
        }),
      ]);
      expect(await handle.release()).toBe(false);
      expect(next.lost).toBe(false);
      expect(await b.locks.isLocked(name)).toBe(true);
      expect(await next.release()).toBe(true);
    },
  );

  ctx.test(
    'handle.extend() finds a lock taken over early: false, lost, taken-over',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const handle = await a.locks.acquire(name, { leaseTime: 5000 });
      await a.backend.extend(ctx.storeKey(name), handle.token, 1);
      await sleep(20);
      const next = await b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 500,
      });
      expect(await handle.extend(5000)).toBe(false);
      expect(handle.lost).toBe(true);
      expect(handle.signal.aborted).toBe(true);
      expect(a.lost.map((event) => event.reason)).toEqual(['taken-over']);
      expect(await next.release()).toBe(true);
    },
  );

  ctx.test('a lost multi-key hold is lost as a whole', async () => {
    const [a] = await ctx.processes(1);
    const handle = await a.locks.acquire([ctx.key(), ctx.key()], {
      leaseTime: 150,
    });
    await aborted(handle.signal);
    expect(handle.lost).toBe(true);
    await eventually(() => a.lost.length === 2);
    expect(await handle.release()).toBe(false);
  });

  ctx.testIf(
    !ctx.capabilities.sharedInstance,
    'a holder whose process goes away without releasing: its key is freed by its lease, and a waiter elsewhere gets it',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const sinceAsked = stopwatch();
      await a.locks.acquire(name, { leaseTime: 300 });
      const waiting = b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 3000,
      });
      await sleep(50);
      // Closing stops the holder's process; its lock stays until the lease ends.
      await a.locks.close();
      expect(await b.locks.isLocked(name)).toBe(true);
      const next = await waiting;
      expect(sinceAsked()).toBeGreaterThanOrEqual(299);
      expect(sinceAsked()).toBeLessThan(300 + 200);
      expect(await next.release()).toBe(true);
    },
  );
}
