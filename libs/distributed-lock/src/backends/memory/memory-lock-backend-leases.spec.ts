import type { LockBusy, LockGrant } from '../lock-backend.js';
import { MemoryLockBackend } from './memory-lock-backend.js';
import {
  expectGrant,
  flush,
  request,
  track,
} from './memory-backend.test-support.js';

describe('MemoryLockBackend', () => {
  let backend: MemoryLockBackend;

  afterEach(async () => {
    await backend.close();
    vi.useRealTimers();
  });

  describe('leases', () => {
    beforeEach(() => {
      vi.useFakeTimers();
      backend = new MemoryLockBackend();
    });

    it('frees the key when the lease ends', async () => {
      await backend.acquire(request('k', 'a', { leaseMs: 100 }));

      await vi.advanceTimersByTimeAsync(99);
      expect(await backend.isLocked('k')).toBe(true);
      await vi.advanceTimersByTimeAsync(1);
      expect(await backend.isLocked('k')).toBe(false);

      expect(await backend.release('k', 'a')).toBe(false);
      expect(await backend.extend('k', 'a', 100)).toBe(false);
      expectGrant(await backend.acquire(request('k', 'b')));
      expect(vi.getTimerCount()).toBe(1);
    });

    it('hands the key to the next waiter when the lease ends', async () => {
      await backend.acquire(request('k', 'a', { leaseMs: 100 }));
      const waiter = track(
        backend.acquire(request('k', 'b', { leaseMs: 700, waitMs: 60_000 })),
      );

      await vi.advanceTimersByTimeAsync(99);
      expect(waiter.done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);

      expect(waiter.value).toEqual({
        acquired: true,
        fencingToken: 2,
        leaseMs: 700,
        handoff: 'remote',
      });
      expect(await backend.release('k', 'a')).toBe(false);
      expect(await backend.acquire(request('k', 'c'))).toEqual({
        acquired: false,
        retryAfterMs: 700,
      });
      expect(await backend.release('k', 'b')).toBe(true);
    });

    it('extends the lease of the holder only', async () => {
      await backend.acquire(request('k', 'a', { leaseMs: 100 }));
      await vi.advanceTimersByTimeAsync(80);

      expect(await backend.extend('k', 'intruder', 1_000)).toBe(false);
      expect(await backend.extend('k', 'a', 100)).toBe(true);
      expect(await backend.acquire(request('k', 'b'))).toEqual({
        acquired: false,
        retryAfterMs: 100,
      });

      await vi.advanceTimersByTimeAsync(99);
      expect(await backend.isLocked('k')).toBe(true);
      await vi.advanceTimersByTimeAsync(1);
      expect(await backend.isLocked('k')).toBe(false);
      expect(await backend.extend('k', 'a', 100)).toBe(false);
      expect(vi.getTimerCount()).toBe(0);
    });

    it('keeps leases longer than one setTimeout allows', async () => {
      const leaseMs = 3_000_000_000;
      await backend.acquire(request('k', 'a', { leaseMs }));

      await vi.advanceTimersByTimeAsync(2 ** 31);
      expect(await backend.isLocked('k')).toBe(true);
      await vi.advanceTimersByTimeAsync(leaseMs - 2 ** 31);
      expect(await backend.isLocked('k')).toBe(false);
      expect(vi.getTimerCount()).toBe(0);
    });

    it('ends a lease by the injected clock even before its timer fires', async () => {
      vi.useRealTimers();
      let now = 0;
      backend = new MemoryLockBackend({ now: () => now });
      await backend.acquire(request('k', 'a', { leaseMs: 60_000 }));
      const waiter = backend.acquire(
        request('k', 'b', { leaseMs: 60_000, waitMs: 60_000 }),
      );

      now = 60_000;

      expect(await backend.acquire(request('k', 'c'))).toEqual({
        acquired: false,
        retryAfterMs: 60_000,
      });
      expect(await waiter).toEqual({
        acquired: true,
        fencingToken: 2,
        leaseMs: 60_000,
        handoff: 'remote',
      });
      expect(await backend.extend('k', 'a', 1_000)).toBe(false);
    });
  });

  describe('fencing', () => {
    beforeEach(() => {
      vi.useFakeTimers();
      backend = new MemoryLockBackend();
    });

    it('strictly increases across grants, hand-offs and expiries', async () => {
      const tokens: number[] = [];
      const grant = (result: LockGrant | LockBusy | undefined): void => {
        tokens.push(expectGrant(result).fencingToken ?? -1);
      };

      grant(await backend.acquire(request('k', 'a', { leaseMs: 100 })));
      const b = track(
        backend.acquire(request('k', 'b', { leaseMs: 100, waitMs: 60_000 })),
      );
      await backend.release('k', 'a'); // hand-off on release
      await flush();
      grant(b.value);

      const c = track(
        backend.acquire(request('k', 'c', { leaseMs: 100, waitMs: 60_000 })),
      );
      await vi.advanceTimersByTimeAsync(100); // hand-off on expiry
      grant(c.value);

      await vi.advanceTimersByTimeAsync(100); // expiry with nobody waiting
      expect(await backend.isLocked('k')).toBe(false);
      grant(await backend.acquire(request('k', 'd')));
      await backend.release('k', 'd');
      grant(await backend.acquire(request('k', 'e')));

      expect(tokens).toEqual([1, 2, 3, 4, 5]);
      expect(
        expectGrant(await backend.acquire(request('other', 'x'))).fencingToken,
      ).toBe(1);
    });

    it('repeats the token of the current grant to its holder only', async () => {
      await backend.acquire(request('k', 'a', { leaseMs: 100 }));
      expect(await backend.fence('k', 'a')).toBe(1);
      expect(await backend.fence('k', 'b')).toBeUndefined();
      await vi.advanceTimersByTimeAsync(100);
      expect(await backend.fence('k', 'a')).toBeUndefined();
    });
  });
});
