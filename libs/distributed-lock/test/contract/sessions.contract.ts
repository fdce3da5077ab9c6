/**
 * Process sessions: a lock held under a session-bound token lasts while the
 * session is renewed, and is free (to waiters, try-once and isLocked) once the
 * session lapsed or ended, never to come back to its dead holder.
 */
import type {
  LockBackend,
  LockGrant,
  SessionStore,
} from '../../src/backends/lock-backend.js';
import {
  LockLostError,
  LockNotAcquiredError,
} from '../../src/errors/lock-errors.js';
import {
  newSessionId,
  sessionOf,
  sessionToken,
} from '../../src/session/session-token.js';
import type { ContractContext } from './backend-contract.js';
import {
  aborted,
  rejectionOf,
  settledFlag,
  sleep,
  stopwatch,
} from './contract-support.js';

/** TTL of a session a test lets lapse. */
const lapseTtl = 300;

/** The backend's sessions; fails the test when the factory claims some it has not. */
function sessionsOf(backend: LockBackend): SessionStore {
  if (backend.sessions === undefined)
    throw new Error(
      'the factory declares capabilities.sessions, but its backend keeps no sessions',
    );
  return backend.sessions;
}

/** A lock held through `backend` by a "process" whose session is never renewed. */
interface DeadHolder {
  readonly sessions: SessionStore;
  readonly id: string;
  readonly token: string;
  /** The fencing token issued to the doomed hold. */
  readonly fence: number;
  /** Milliseconds since the session's `open` was sent. */
  readonly sinceOpened: () => number;
}

/**
 * Opens a session of `ttlMs` on `backend` and takes `key` under it with the
 * session hold lease, as a `LockService` would, then never renews it.
 */
async function holdUnderUnrenewedSession(
  backend: LockBackend,
  key: string,
  random: string,
  ttlMs: number,
): Promise<DeadHolder> {
  const sessions = sessionsOf(backend);
  const id = newSessionId();
  const sinceOpened = stopwatch();
  await sessions.open(id, ttlMs);
  const token = sessionToken(id, random);
  const grant = await backend.acquire({
    key,
    token,
    leaseMs: sessions.holdLeaseMs,
    waitMs: 0,
  });
  expect(grant.acquired).toBe(true);
  const fence = await backend.fence(key, token);
  expect(fence).toEqual(expect.any(Number));
  return { sessions, id, token, fence: fence!, sinceOpened };
}

/** The fencing token of a grant: the one it brought, or one asked for. */
async function fenceOf(
  backend: LockBackend,
  key: string,
  token: string,
  grant: LockGrant,
): Promise<number | undefined> {
  return grant.fencingToken ?? backend.fence(key, token);
}

/** Resolves with `signal`'s reason once it aborts; rejects if not within `ms`. */
async function abortedWithin(
  signal: AbortSignal,
  ms: number,
): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the hold was not reported lost within ${ms} ms`)),
      ms,
    );
  });
  try {
    return await Promise.race([aborted(signal), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Checks that the dead holder's token no longer owns `key` in any way. */
async function expectDeadTokenRefused(
  backend: LockBackend,
  key: string,
  dead: DeadHolder,
): Promise<void> {
  expect(await backend.fence(key, dead.token)).toBeUndefined();
  expect(await backend.extend(key, dead.token, 5000)).toBe(false);
  expect(await backend.release(key, dead.token)).toBe(false);
}

export function sessionsContract(ctx: ContractContext): void {
  const sessionTest = (title: string, fn: () => Promise<void>): void =>
    ctx.testIf(ctx.capabilities.sessions, title, fn);

  sessionTest(
    'a session-bound hold outlives several session TTLs while the session is renewed; a waiter elsewhere does not get it',
    async () => {
      const [a, b] = await ctx.processes(2, { sessionTtl: 400 });
      const name = ctx.key();
      const handle = await a.locks.acquire(name);
      expect(sessionOf(handle.token)).toEqual(expect.any(String));

      const waited = stopwatch();
      const error = await rejectionOf(
        b.locks.acquire(name, { waitTime: 1500 }),
      );
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      // Nearly four TTLs: only renewals of the session kept the lock.
      expect(waited()).toBeGreaterThanOrEqual(1490);
      expect(handle.lost).toBe(false);
      expect(a.lost).toEqual([]);
      expect(await b.locks.isLocked(name)).toBe(true);

      expect(await handle.release()).toBe(true);
      const next = await b.locks.tryAcquire(name, { leaseTime: 5000 });
      expect(next).not.toBeNull();
      expect(await next!.release()).toBe(true);
    },
  );

  sessionTest(
    'a session that lapses frees its lock: a waiter in another process gets it soon after, with a higher fencing token, and the dead token owns nothing',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const dead = await holdUnderUnrenewedSession(
        a.backend,
        key,
        ctx.token(),
        lapseTtl,
      );

      const token = ctx.token();
      const granted = await b.backend.acquire({
        key,
        token,
        leaseMs: 5000,
        waitMs: 3000,
      });
      const at = dead.sinceOpened();
      console.log(
        `sessions: a waiter got the lock of a lapsed session ${at.toFixed(0)} ms after the session opened (TTL ${lapseTtl} ms)`,
      );
      expect(granted.acquired).toBe(true);
      // Never before the session can have lapsed; soon after.
      expect(at).toBeGreaterThanOrEqual(lapseTtl - 5);
      expect(at).toBeLessThan(lapseTtl + 1000);
      const fence = await fenceOf(b.backend, key, token, granted as LockGrant);
      expect(fence).toBeGreaterThan(dead.fence);

      await expectDeadTokenRefused(a.backend, key, dead);
      expect(await b.backend.isLocked(key)).toBe(true);
      expect(await b.backend.release(key, token)).toBe(true);
    },
  );

  sessionTest(
    'after a session lapsed, isLocked is false and a try-once takes the lock',
    async () => {
      const [a, b] = await ctx.processes(2);
      const name = ctx.key();
      const key = ctx.storeKey(name);
      const dead = await holdUnderUnrenewedSession(
        a.backend,
        key,
        ctx.token(),
        lapseTtl,
      );
      expect(await b.locks.isLocked(name)).toBe(true);
      expect(await b.locks.tryAcquire(name, { leaseTime: 5000 })).toBeNull();

      await sleep(lapseTtl + 100 - dead.sinceOpened());
      expect(await b.locks.isLocked(name)).toBe(false);
      const handle = await b.locks.tryAcquire(name, { leaseTime: 5000 });
      expect(handle).not.toBeNull();
      expect(await handle!.fence()).toBeGreaterThan(dead.fence);
      await expectDeadTokenRefused(a.backend, key, dead);
      expect(await handle!.release()).toBe(true);
    },
  );

  sessionTest(
    'ending a session frees its lock for a waiter in another process, by the session’s TTL at the latest (the time taken is printed)',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const ttl = 2000;
      const dead = await holdUnderUnrenewedSession(
        a.backend,
        key,
        ctx.token(),
        ttl,
      );
      const token = ctx.token();
      const waiting = b.backend.acquire({
        key,
        token,
        leaseMs: 5000,
        waitMs: ttl + 1500,
      });
      const done = settledFlag(waiting);
      await sleep(60);
      expect(done()).toBe(false);

      const sinceEnded = stopwatch();
      await dead.sessions.end(dead.id);
      const granted = await waiting;
      const after = sinceEnded();
      console.log(
        `sessions: a waiter got the lock ${after.toFixed(0)} ms after its holder's session was ended (TTL ${ttl} ms)`,
      );
      expect(granted.acquired).toBe(true);
      // At once where the store pushes the news; a waiter that only looks at
      // its next check may take until the TTL.
      expect(after).toBeLessThan(ttl + 1000);
      const fence = await fenceOf(b.backend, key, token, granted as LockGrant);
      expect(fence).toBeGreaterThan(dead.fence);
      await expectDeadTokenRefused(a.backend, key, dead);
      expect(await b.backend.release(key, token)).toBe(true);
    },
  );

  sessionTest(
    'renewing a lapsed session resolves false and does not bring it back',
    async () => {
      const [a, b] = await ctx.processes(2);
      const key = ctx.storeKey(ctx.key());
      const dead = await holdUnderUnrenewedSession(
        a.backend,
        key,
        ctx.token(),
        lapseTtl,
      );
      await sleep(lapseTtl + 100 - dead.sinceOpened());

      // Before anyone else looked at the lock: a revived session would keep it.
      expect(await dead.sessions.renew(dead.id, 5000)).toBe(false);
      expect(await dead.sessions.renew(dead.id, 5000)).toBe(false);
      const token = ctx.token();
      const taken = await b.backend.acquire({
        key,
        token,
        leaseMs: 5000,
        waitMs: 0,
      });
      expect(taken.acquired).toBe(true);
      await expectDeadTokenRefused(a.backend, key, dead);
      expect(await b.backend.release(key, token)).toBe(true);
    },
  );

  sessionTest(
    'a LockService whose session cannot be renewed reports its holds lost (session-expired), and a waiter is granted',
    async () => {
      const ttl = 600;
      const [a, b] = await ctx.processes(2, { sessionTtl: ttl });
      const name = ctx.key();
      const handle = await a.locks.acquire(name);
      const signal = handle.signal;
      const id = sessionOf(handle.token);
      expect(id).toEqual(expect.any(String));
      const waiting = b.locks.acquire(name, {
        leaseTime: 5000,
        waitTime: 3000,
      });
      await sleep(60);

      // Behind the service's back: its next renewal finds the session gone.
      const sinceEnded = stopwatch();
      await sessionsOf(a.backend).end(id!);
      const reason = await abortedWithin(signal, 3 * ttl);
      // Renewals go every third of the TTL.
      expect(sinceEnded()).toBeLessThan(ttl / 3 + 300);
      expect(reason).toBeInstanceOf(LockLostError);
      expect(handle.lost).toBe(true);
      expect(a.lost).toEqual([
        expect.objectContaining({
          key: name,
          token: handle.token,
          reason: 'session-expired',
        }),
      ]);

      const next = await waiting;
      expect(next.lost).toBe(false);
      expect(await handle.release()).toBe(false);
      expect(a.lost).toHaveLength(1);
      expect(await next.release()).toBe(true);

      // The next hold opens a session of its own.
      const again = await a.locks.acquire(ctx.key());
      expect(sessionOf(again.token)).toEqual(expect.any(String));
      expect(sessionOf(again.token)).not.toBe(id);
      expect(await again.release()).toBe(true);
    },
  );
}
