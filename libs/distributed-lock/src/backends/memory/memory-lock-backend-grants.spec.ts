import { setImmediate as nextTurn } from 'node:timers/promises';

import { MemoryLockBackend } from './memory-lock-backend.js';
import {
  expectGrant,
  flush,
  request,
  track,
} from './memory-backend.test-support.js';

/** A non-atomic read-modify-write that yields between the read and the write. */
async function increment(counter: { value: number }): Promise<void> {
  const read = counter.value;
  await nextTurn();
  counter.value = read + 1;
}

describe('MemoryLockBackend', () => {
  let backend: MemoryLockBackend;

  afterEach(async () => {
    await backend.close();
    vi.useRealTimers();
  });

  describe('grants', () => {
    beforeEach(() => {
      backend = new MemoryLockBackend();
    });

    it('grants a free key at once with the requested lease', async () => {
      const result = await backend.acquire(
        request('k', 'a', { leaseMs: 1234 }),
      );

      expect(result).toEqual({
        acquired: true,
        fencingToken: 1,
        leaseMs: 1234,
      });
      expect(await backend.isLocked('k')).toBe(true);
      expect(await backend.isLocked('other')).toBe(false);
    });

    it('resolves asynchronously, like a network store', async () => {
      const acquired = track(backend.acquire(request('k', 'a')));
      const locked = track(backend.isLocked('k'));

      expect(acquired.done).toBe(false);
      expect(locked.done).toBe(false);
      await nextTurn();
      expect(acquired.done).toBe(true);
      expect(locked.value).toBe(true);
    });

    it('keeps concurrent workers out of each other’s critical section', async () => {
      const workers = 40;
      const rounds = 5;
      // Control: without the lock the read-modify-write loses updates.
      const unguarded = { value: 0 };
      await Promise.all(
        Array.from({ length: workers }, async () => {
          for (let round = 0; round < rounds; round++) {
            await increment(unguarded);
          }
        }),
      );
      expect(unguarded.value).toBeLessThan(workers * rounds);

      const guarded = { value: 0 };
      let inside = 0;
      let maxInside = 0;
      await Promise.all(
        Array.from({ length: workers }, async (_, id) => {
          for (let round = 0; round < rounds; round++) {
            const token = `worker-${id}-${round}`;
            const result = await backend.acquire(
              request('counter', token, { waitMs: 10_000 }),
            );
            expectGrant(result);
            inside++;
            maxInside = Math.max(maxInside, inside);
            await increment(guarded);
            inside--;
            expect(await backend.release('counter', token)).toBe(true);
          }
        }),
      );

      expect(guarded.value).toBe(workers * rounds);
      expect(maxInside).toBe(1);
      expect(await backend.isLocked('counter')).toBe(false);
    });
  });

  describe('owner-only release', () => {
    beforeEach(() => {
      backend = new MemoryLockBackend();
    });

    it('lets only the holder release, and only once', async () => {
      await backend.acquire(request('k', 'owner'));

      expect(await backend.release('k', 'intruder')).toBe(false);
      expect(await backend.isLocked('k')).toBe(true);
      expect(await backend.release('other-key', 'owner')).toBe(false);

      expect(await backend.release('k', 'owner')).toBe(true);
      expect(await backend.isLocked('k')).toBe(false);
      expect(await backend.release('k', 'owner')).toBe(false);
    });

    it('does not hand the key on when a non-owner releases', async () => {
      vi.useFakeTimers();
      backend = new MemoryLockBackend();
      await backend.acquire(request('k', 'owner'));
      const waiter = track(
        backend.acquire(request('k', 'waiter', { waitMs: 60_000 })),
      );

      expect(await backend.release('k', 'waiter')).toBe(false);
      await flush();
      expect(waiter.done).toBe(false);

      await backend.release('k', 'owner');
      await flush();
      expectGrant(waiter.value);
    });
  });

  describe('busy', () => {
    it('resolves busy at once with the holder’s remaining lease when waitMs is 0', async () => {
      let now = 1_000;
      backend = new MemoryLockBackend({ now: () => now });
      await backend.acquire(request('k', 'a', { leaseMs: 500 }));
      now += 200;

      const result = await backend.acquire(request('k', 'b'));

      expect(result).toEqual({ acquired: false, retryAfterMs: 300 });
    });

    it('rejects invalid leases and waits', async () => {
      backend = new MemoryLockBackend();

      await expect(
        backend.acquire(request('k', 'a', { leaseMs: 0 })),
      ).rejects.toThrow(RangeError);
      await expect(
        backend.acquire(request('k', 'a', { leaseMs: Number.NaN })),
      ).rejects.toThrow(RangeError);
      await expect(
        backend.acquire(request('k', 'a', { waitMs: -1 })),
      ).rejects.toThrow(RangeError);
      await backend.acquire(request('k', 'a'));
      await expect(backend.extend('k', 'a', -5)).rejects.toThrow(RangeError);
    });
  });
});
