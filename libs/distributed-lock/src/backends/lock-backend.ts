import type { LockBackendHealth } from './backend-health.js';

/**
 * The contract between {@link LockService} and a lock store. The service owns
 * key building, reentrancy, leases and the watchdog; a backend only knows how to
 * grant, extend and release one key atomically, issue its fencing tokens, and
 * make a caller wait.
 *
 * A single-Redis backend, an in-memory backend and (later) a quorum backend over
 * several Redis nodes all implement this, so callers never change.
 *
 * Keys passed to a backend are already validated and prefixed. Every method
 * reports failure by rejecting, never by throwing.
 */
export interface LockBackend {
  /**
   * Takes `key` for `token`, waiting up to `waitMs` (0 = try once). Waiters
   * must be served in arrival order and woken when the lock is released or
   * expires, not by fixed-interval polling.
   *
   * A grant must never reach the caller once its lease may have lapsed:
   * measured from the earliest moment the lease can have been set, one with
   * little left is confirmed with the store first, and one that lapsed is
   * waited for again within `waitMs`.
   *
   * Resolves a {@link LockGrant} when the caller holds the lock, or
   * a {@link LockBusy} when the wait ran out. Rejects with `LockBackendError`
   * when the store cannot be reached in bounded time.
   */
  acquire(request: AcquireRequest): Promise<LockGrant | LockBusy>;

  /**
   * Sets the remaining lease of `key` to `leaseMs` if `token` still owns it.
   * Resolves false when the lock is no longer owned by `token` (lost).
   */
  extend(key: string, token: string, leaseMs: number): Promise<boolean>;

  /**
   * Deletes `key` if `token` owns it, handing it to the next waiter if any.
   * Resolves false, and touches nothing, when `token` no longer owns it. A
   * release whose command may have run twice (re-sent after a reconnect)
   * and finds the token gone resolves true: its first run freed the key. The
   * holder's own deadline tells a lease that had run out before.
   */
  release(key: string, token: string): Promise<boolean>;

  /**
   * Issues the next fencing token of `key` if `token` still holds it, atomically
   * with that check. Resolves undefined, and issues nothing, when it does not.
   */
  fence(key: string, token: string): Promise<number | undefined>;

  /** Whether anyone holds `key` right now. */
  isLocked(key: string): Promise<boolean>;

  /** Stops waiting callers and frees connections the backend owns. Idempotent. */
  close(): Promise<void>;

  /**
   * Checks whether the store can serve locks right now, for health checks:
   * each server's reachability and round trip, and whether the lock scripts
   * are in its cache. Resolves within `timeoutMs` (default: the backend's
   * own command timeout) and never rejects: a store that does not answer
   * in time is reported down. Optional: without it, `LockHealthIndicator`
   * times an `isLocked` call instead.
   */
  probe?(timeoutMs?: number): Promise<LockBackendHealth>;

  /**
   * Process sessions, when the store keeps them (see `SessionStore`).
   * Without them, a hold with no explicit lease renews its own lease.
   */
  readonly sessions?: SessionStore;
}

/**
 * Process sessions: one short-lived record per process, which it keeps alive,
 * and to which every lock held under a token of the form
 * `<session id>.<random>` (see `session-token.ts`) is bound. A lock whose
 * holder's session lapsed is free: the store (or a waiter, on its behalf)
 * frees it with a compare-and-delete on the dead holder's token, and hands it
 * to the next waiter, without waiting out the lock's own lease.
 *
 * The argument that this is safe rests on one rule every store keeps: **a
 * session that lapsed never comes back.** It is renewed only while it still
 * exists (`PEXPIRE`, never `SET`), and an id is never opened twice. So
 * "session S is gone", once seen, stays true, and a takeover needs no
 * atomicity across the session's record and the lock (on Redis Cluster they
 * sit in different slots).
 */
export interface SessionStore {
  /** Creates session `id` for `ttlMs`. Rejects when the store cannot confirm it. */
  open(id: string, ttlMs: number): Promise<void>;
  /**
   * Sets the session's remaining time to `ttlMs` while it still exists.
   * Resolves false when it had lapsed (it is not brought back); rejects with
   * `LockBackendError` when the store cannot be reached in bounded time.
   */
  renew(id: string, ttlMs: number): Promise<boolean>;
  /** Ends the session at once: every lock bound to it is free. */
  end(id: string): Promise<void>;
  /**
   * Calls `listener` whenever the connection to the store was lost and made
   * again: the store may have restarted empty or failed over, so the session
   * is renewed at once rather than at its next turn. Returns the unsubscribe.
   */
  onReconnect?(listener: () => void): () => void;
  /**
   * Calls `listener` when the session can no longer be trusted at all (the
   * store frees its locks on a closed connection, and this process's
   * connection closed): every hold bound to it is lost at once. Returns the
   * unsubscribe.
   */
  onDisconnect?(listener: () => void): () => void;
  /**
   * The lease a session-bound lock's key carries in the store, renewed every
   * third of it. Long, since the session frees the lock when its holder
   * dies: it only bounds how long a key a dead holder left behind, which
   * nobody asks for again, stays in the store.
   */
  readonly holdLeaseMs: number;
}

export interface AcquireRequest {
  /** Prefixed key. */
  readonly key: string;
  /** Random owner token, at least 128 bits. */
  readonly token: string;
  /** Lease to set, in milliseconds. */
  readonly leaseMs: number;
  /** How long to wait for a busy lock, in milliseconds; 0 tries once. */
  readonly waitMs: number;
  /** Aborting it stops waiting (the acquisition then resolves busy). */
  readonly signal?: AbortSignal;
  /**
   * The caller wants the grant's fencing token. A backend SHOULD issue it in
   * the same atomic step as the grant and return it as
   * {@link LockGrant.fencingToken}, saving the round trip of a
   * {@link LockBackend.fence} call. A grant may still come without one (a
   * lock passed in memory between callers of one process, a backend that
   * cannot issue it with the grant): `LockService` then asks
   * {@link LockBackend.fence} before it hands the lock to its caller.
   */
  readonly fence?: boolean;
}

export interface LockGrant {
  readonly acquired: true;
  /**
   * The grant's fencing token, when the backend issued one with it (a lock
   * handed over from the queue carries one, and so should a grant asked for
   * with {@link AcquireRequest.fence}). Otherwise the holder asks
   * {@link LockBackend.fence} if and when it needs one. Strictly increasing
   * per key across all owners, kept by the store.
   */
  readonly fencingToken?: number;
  /**
   * The lease the lock has at least, in milliseconds counted from when
   * {@link LockBackend.acquire} was called. A backend may grant a shorter
   * lease than requested (a lock handed to a queued waiter is granted briefly,
   * so that a waiter that died cannot stall the queue); the service then
   * tops it up to the requested lease, within a third of what is left.
   */
  readonly leaseMs: number;
  /**
   * Set when the lock was handed to this caller rather than taken free:
   * `'local'` passed from another caller of this process, `'remote'` by the
   * store to the head of its queue. Reported to metrics only.
   */
  readonly handoff?: 'local' | 'remote';
}

export interface LockBusy {
  readonly acquired: false;
  /** Remaining lease of the current holder in milliseconds, when known. */
  readonly retryAfterMs?: number;
}
