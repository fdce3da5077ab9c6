import { LockBackendError } from '../../errors/lock-errors.js';
import { sessionToken } from '../../session/session-token.js';
import type { SessionStore } from '../lock-backend.js';
import { MemoryLockBackend } from './memory-lock-backend.js';
import { expectGrant, request, track } from './memory-backend.test-support.js';

const ttl = 1_000;

describe('MemoryLockBackend sessions', () => {
  let backend: MemoryLockBackend;
  let sessions: SessionStore;

  beforeEach(() => {
    // Fakes performance.now too: the sessions' monotonic clock moves with the timers.
    vi.useFakeTimers();
    backend = new MemoryLockBackend();
    sessions = backend.sessions;
  });

  afterEach(async () => {
    await backend.close();
    vi.useRealTimers();
  });

  /** Takes `key` for a token bound to session `id`, with the session hold lease. */
  async function holdUnder(id: string, key: string, random = 'a') {
    const token = sessionToken(id, random);
    const grant = expectGrant(
      await backend.acquire(
        request(key, token, { leaseMs: sessions.holdLeaseMs }),
      ),
    );
    return { token, grant };
  }

  describe('the store', () => {
    it('renews a session only while it is live, and never brings it back', async () => {
      expect(sessions.holdLeaseMs).toBe(24 * 60 * 60 * 1000);
      await sessions.open('s1', ttl);
      await vi.advanceTimersByTimeAsync(ttl - 1);
      expect(await sessions.renew('s1', ttl)).toBe(true);
      await vi.advanceTimersByTimeAsync(ttl - 1);
      expect(await sessions.renew('s1', ttl)).toBe(true);

      await vi.advanceTimersByTimeAsync(ttl);
      expect(await sessions.renew('s1', ttl)).toBe(false);
      expect(await sessions.renew('s1', ttl)).toBe(false);
      expect(vi.getTimerCount()).toBe(0);
    });

    it('ends a session at once, and ending it again does nothing', async () => {
      await sessions.open('s1', ttl);
      await sessions.end('s1');
      expect(await sessions.renew('s1', ttl)).toBe(false);
      await expect(sessions.end('s1')).resolves.toBeUndefined();
      await expect(sessions.end('never-opened')).resolves.toBeUndefined();
      expect(vi.getTimerCount()).toBe(0);
    });

    it('refuses to open a live session again, and bad TTLs', async () => {
      await sessions.open('s1', ttl);
      await expect(sessions.open('s1', ttl)).rejects.toThrow(LockBackendError);
      await expect(sessions.open('s2', 0)).rejects.toThrow(RangeError);
      await expect(sessions.renew('s1', Number.NaN)).rejects.toThrow(
        RangeError,
      );
    });

    it('keeps one timer per session however often it is renewed', async () => {
      await sessions.open('s1', ttl);
      for (let i = 0; i < 10; i++) {
        await vi.advanceTimersByTimeAsync(ttl / 3);
        expect(await sessions.renew('s1', ttl)).toBe(true);
        expect(vi.getTimerCount()).toBe(1);
      }
    });
  });

  describe('locks bound to a session', () => {
    it('are kept while the session is renewed, whatever the time', async () => {
      await sessions.open('s1', ttl);
      await holdUnder('s1', 'k');
      const waiter = track(
        backend.acquire(request('k', 'b', { waitMs: 60_000 })),
      );
      for (let i = 0; i < 15; i++) {
        await vi.advanceTimersByTimeAsync(ttl / 3);
        await sessions.renew('s1', ttl);
      }
      expect(waiter.done).toBe(false);
      expect(await backend.isLocked('k')).toBe(true);
    });

    it('pass to the next waiter when the session lapses, with a higher fencing token', async () => {
      await sessions.open('s1', ttl);
      const dead = await holdUnder('s1', 'k');
      expect(await backend.fence('k', dead.token)).toBe(1);
      const first = track(
        backend.acquire(request('k', 'b', { waitMs: 60_000 })),
      );
      const second = track(
        backend.acquire(request('k', 'c', { waitMs: 60_000 })),
      );

      await vi.advanceTimersByTimeAsync(ttl - 1);
      expect(first.done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);

      expect(first.value).toEqual({
        acquired: true,
        fencingToken: 2,
        leaseMs: 10_000,
        handoff: 'remote',
      });
      expect(second.done).toBe(false);
      expect(await backend.fence('k', dead.token)).toBeUndefined();
      expect(await backend.extend('k', dead.token, 10_000)).toBe(false);
      expect(await backend.release('k', dead.token)).toBe(false);
      expect(await backend.release('k', 'b')).toBe(true);
      await vi.advanceTimersByTimeAsync(0);
      expect(expectGrant(second.value).fencingToken).toBe(3);
    });

    it('are free once the session lapsed: isLocked is false and a try-once takes it', async () => {
      await sessions.open('s1', ttl);
      await holdUnder('s1', 'k');
      expect(await backend.acquire(request('k', 'b'))).toEqual({
        acquired: false,
        retryAfterMs: ttl,
      });

      await vi.advanceTimersByTimeAsync(ttl);
      expect(await backend.isLocked('k')).toBe(false);
      expect(vi.getTimerCount()).toBe(0);
      expect(expectGrant(await backend.acquire(request('k', 'b')))).toEqual({
        acquired: true,
        fencingToken: 2,
        leaseMs: 10_000,
      });
    });

    it('are all freed by end(), and other sessions keep theirs', async () => {
      await sessions.open('s1', ttl);
      await sessions.open('s2', ttl);
      const doomed = await holdUnder('s1', 'k1');
      await holdUnder('s1', 'k2', 'other');
      await holdUnder('s2', 'k3');
      const waiter = track(
        backend.acquire(request('k1', 'b', { waitMs: 60_000 })),
      );

      await sessions.end('s1');
      await vi.advanceTimersByTimeAsync(0);

      expect(waiter.value).toEqual({
        acquired: true,
        fencingToken: 2,
        leaseMs: 10_000,
        handoff: 'remote',
      });
      expect(await backend.isLocked('k2')).toBe(false);
      expect(await backend.isLocked('k3')).toBe(true);
      expect(await backend.release('k1', doomed.token)).toBe(false);
    });

    it('are not brought back by a renewal after the lapse', async () => {
      await sessions.open('s1', ttl);
      const dead = await holdUnder('s1', 'k');
      await vi.advanceTimersByTimeAsync(ttl + 10);

      expect(await sessions.renew('s1', ttl)).toBe(false);
      expect(await backend.extend('k', dead.token, 10_000)).toBe(false);
      expectGrant(await backend.acquire(request('k', 'b')));
    });

    it('give a holder whose session is gone nothing to hold', async () => {
      await sessions.open('s1', ttl);
      await sessions.end('s1');
      // Granted, as if the session lapsed just after: the key stays free.
      await holdUnder('s1', 'k');
      expect(await backend.isLocked('k')).toBe(false);
      await holdUnder('never-opened', 'j');
      expect(await backend.isLocked('j')).toBe(false);
      expect(vi.getTimerCount()).toBe(0);
    });

    it('skip, on hand-off, a waiter whose own session lapsed while it waited', async () => {
      await sessions.open('holder', 60_000);
      await sessions.open('waiter', ttl);
      const holder = await holdUnder('holder', 'k');
      const deadWaiter = track(
        backend.acquire(
          request('k', sessionToken('waiter', 'w'), { waitMs: 60_000 }),
        ),
      );
      const next = track(
        backend.acquire(request('k', 'next', { waitMs: 60_000 })),
      );
      await vi.advanceTimersByTimeAsync(ttl);

      await backend.release('k', holder.token);
      await vi.advanceTimersByTimeAsync(0);

      expect(expectGrant(deadWaiter.value).fencingToken).toBe(2);
      expect(expectGrant(next.value).fencingToken).toBe(3);
      expect(await backend.fence('k', 'next')).toBe(3);
    });

    it('tell a busy caller when the holder’s session lapses, if before its lease', async () => {
      await sessions.open('s1', ttl);
      await holdUnder('s1', 'k');
      await vi.advanceTimersByTimeAsync(400);
      expect(await backend.acquire(request('k', 'b'))).toEqual({
        acquired: false,
        retryAfterMs: ttl - 400,
      });
    });
  });

  describe('close', () => {
    it('stops every session timer and refuses session calls', async () => {
      await sessions.open('s1', ttl);
      await sessions.open('s2', ttl);
      await holdUnder('s1', 'k');

      await backend.close();

      expect(vi.getTimerCount()).toBe(0);
      await expect(sessions.open('s3', ttl)).rejects.toThrow(LockBackendError);
      await expect(sessions.renew('s1', ttl)).rejects.toThrow(LockBackendError);
      await expect(sessions.end('s1')).rejects.toThrow(LockBackendError);
    });
  });
});
