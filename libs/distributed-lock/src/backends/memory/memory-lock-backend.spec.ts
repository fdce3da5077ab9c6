import { getEventListeners } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';

import { LockBackendError } from '../../errors/lock-errors.js';
import type { AcquireRequest, LockBusy, LockGrant } from '../lock-backend.js';
import { MemoryLockBackend } from './memory-lock-backend.js';

function request(
  key: string,
  token: string,
  overrides: Partial<AcquireRequest> = {},
): AcquireRequest {
  return { key, token, leaseMs: 10_000, waitMs: 0, ...overrides };
}

/** Records the outcome of a promise so a test can look at it without awaiting. */
function track<T>(promise: Promise<T>): { done: boolean; value?: T } {
  const state: { done: boolean; value?: T } = { done: false };
  void promise.then((value) => {
    state.done = true;
    state.value = value;
  });
  return state;
}

function expectGrant(result: LockGrant | LockBusy | undefined): LockGrant {
  expect(result?.acquired).toBe(true);
  return result as LockGrant;
}

/** A non-atomic read-modify-write that yields between the read and the write. */
async function increment(counter: { value: number }): Promise<void> {
  const read = counter.value;
  await nextTurn();
  counter.value = read + 1;
}

/** Lets pending promise callbacks run while timers are faked. */
async function flush(): Promise<void> {
  await vi.advanceTimersByTimeAsync(0);
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
      });
      expect(await backend.extend('k', 'a', 1_000)).toBe(false);
    });
  });

  describe('waiting', () => {
    beforeEach(() => {
      vi.useFakeTimers();
      backend = new MemoryLockBackend();
    });

    it('serves waiters in arrival order, newcomers included', async () => {
      vi.useRealTimers();
      const order: string[] = [];
      await backend.acquire(request('k', 'holder'));
      const take = async (token: string): Promise<void> => {
        expectGrant(
          await backend.acquire(request('k', token, { waitMs: 10_000 })),
        );
        order.push(token);
        await nextTurn();
        expect(await backend.release('k', token)).toBe(true);
      };

      const first = ['w0', 'w1', 'w2', 'w3', 'w4'].map(take);
      await nextTurn();
      await backend.release('k', 'holder');
      // The key went straight to w0: a newcomer finds it busy and queues last.
      expect((await backend.acquire(request('k', 'try-once'))).acquired).toBe(
        false,
      );
      const late = take('late');
      await Promise.all([...first, late]);

      expect(order).toEqual(['w0', 'w1', 'w2', 'w3', 'w4', 'late']);
      expect(await backend.isLocked('k')).toBe(false);
    });

    it('wakes only the next waiter on release', async () => {
      await backend.acquire(request('k', 'a'));
      const b = track(backend.acquire(request('k', 'b', { waitMs: 60_000 })));
      const c = track(backend.acquire(request('k', 'c', { waitMs: 60_000 })));

      await backend.release('k', 'a');
      await flush();

      expectGrant(b.value);
      expect(c.done).toBe(false);
    });

    it('resolves busy when the wait runs out and drops the waiter from the queue', async () => {
      await backend.acquire(request('k', 'a', { leaseMs: 1_000 }));
      const quitter = track(
        backend.acquire(request('k', 'quitter', { waitMs: 100 })),
      );
      const patient = track(
        backend.acquire(request('k', 'patient', { waitMs: 60_000 })),
      );

      await vi.advanceTimersByTimeAsync(99);
      expect(quitter.done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(quitter.value).toEqual({ acquired: false, retryAfterMs: 900 });

      await backend.release('k', 'a');
      await flush();
      expect(patient.value).toEqual({
        acquired: true,
        fencingToken: 2,
        leaseMs: 10_000,
      });
      expect(await backend.release('k', 'quitter')).toBe(false);
      expect(await backend.release('k', 'patient')).toBe(true);
      expect(await backend.isLocked('k')).toBe(false);
      expect(vi.getTimerCount()).toBe(0);
    });

    it('stops waiting when the signal aborts and removes its listener', async () => {
      await backend.acquire(request('k', 'a'));
      const controller = new AbortController();
      const aborted = track(
        backend.acquire(
          request('k', 'aborted', {
            waitMs: 60_000,
            signal: controller.signal,
          }),
        ),
      );
      const next = track(
        backend.acquire(request('k', 'next', { waitMs: 60_000 })),
      );
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);

      controller.abort();
      await flush();

      expect(aborted.value).toEqual({ acquired: false, retryAfterMs: 10_000 });
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
      await backend.release('k', 'a');
      await flush();
      expectGrant(next.value);
      expect(await backend.release('k', 'aborted')).toBe(false);
    });

    it('resolves busy without queueing when the signal is already aborted', async () => {
      await backend.acquire(request('k', 'a'));
      const signal = AbortSignal.abort();
      const timersBefore = vi.getTimerCount();

      const result = await backend.acquire(
        request('k', 'b', { waitMs: 60_000, signal }),
      );

      expect(result).toEqual({ acquired: false, retryAfterMs: 10_000 });
      expect(vi.getTimerCount()).toBe(timersBefore);
      expect(getEventListeners(signal, 'abort')).toHaveLength(0);
      await backend.release('k', 'a');
      expect(await backend.isLocked('k')).toBe(false);
    });

    it('removes the abort listener and wait timer of a waiter that is granted', async () => {
      await backend.acquire(request('k', 'a'));
      const controller = new AbortController();
      const waiter = backend.acquire(
        request('k', 'b', { waitMs: 60_000, signal: controller.signal }),
      );
      expect(vi.getTimerCount()).toBe(2);

      await backend.release('k', 'a');
      expectGrant(await waiter);

      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
      expect(vi.getTimerCount()).toBe(1);
      controller.abort();
      expect(await backend.isLocked('k')).toBe(true);
      await backend.release('k', 'b');
      expect(vi.getTimerCount()).toBe(0);
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

  describe('close', () => {
    beforeEach(() => {
      vi.useFakeTimers();
      backend = new MemoryLockBackend();
    });

    it('settles waiters as busy, clears every timer and listener, and refuses new calls', async () => {
      await backend.acquire(request('k', 'a'));
      await backend.acquire(request('j', 'a'));
      const controller = new AbortController();
      const b = backend.acquire(
        request('k', 'b', { waitMs: 60_000, signal: controller.signal }),
      );
      const c = backend.acquire(request('k', 'c', { waitMs: Infinity }));
      const d = backend.acquire(request('j', 'd', { waitMs: 60_000 }));
      expect(vi.getTimerCount()).toBe(4);

      await backend.close();

      expect(await b).toEqual({ acquired: false });
      expect(await c).toEqual({ acquired: false });
      expect(await d).toEqual({ acquired: false });
      expect(vi.getTimerCount()).toBe(0);
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);

      const closed = backend.acquire(request('k', 'e'));
      await expect(closed).rejects.toThrow(LockBackendError);
      await expect(closed).rejects.toThrow('backend closed');
      await expect(backend.release('k', 'a')).rejects.toThrow(LockBackendError);
      await expect(backend.isLocked('k')).rejects.toThrow(LockBackendError);
      await expect(backend.close()).resolves.toBeUndefined();
    });

    it('leaves no timers behind once idle', async () => {
      await backend.acquire(request('k', 'a', { leaseMs: 100 }));
      const b = backend.acquire(request('k', 'b', { waitMs: 50 }));
      await backend.release('k', 'a');
      expectGrant(await b);
      await backend.release('k', 'b');
      expect(vi.getTimerCount()).toBe(0);

      await backend.acquire(request('k', 'a', { leaseMs: 100 }));
      const timedOut = backend.acquire(request('k', 'b', { waitMs: 50 }));
      await vi.advanceTimersByTimeAsync(50);
      expect((await timedOut).acquired).toBe(false);
      await vi.advanceTimersByTimeAsync(50);
      expect(vi.getTimerCount()).toBe(0);
    });
  });
});
