import { getEventListeners } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';

import { LockBackendError } from '../../errors/lock-errors.js';
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
        handoff: 'remote',
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
