import type { HeldKey } from './held-key.js';
import { lockScope, openScope } from './lock-scope.js';

/**
 * A held lock on one or more keys. Release it exactly once, in a `finally`
 * (or use `LockService.using`, which does).
 */
export class LockHandle {
  /** The keys held, without prefix, in canonical (acquisition) order. */
  readonly keys: readonly string[];
  /** The random owner token of this acquisition (shared by reentrant holds). */
  readonly token: string;
  private combinedSignal?: AbortSignal;
  /** True when this hold joined a lock the same call chain already held. */
  readonly reentrant: boolean;

  private releasing?: Promise<boolean>;
  /** Closes the scope {@link run} opened; called when the release starts. */
  private closeScope?: () => void;

  /** @internal Created by LockService. */
  constructor(
    private readonly held: readonly HeldKey[],
    private readonly onRelease: (held: readonly HeldKey[]) => Promise<boolean>,
    reentrant: boolean,
  ) {
    this.keys = held.map((h) => h.name);
    this.token = held[0].token;
    this.reentrant = reentrant;
  }

  /**
   * The fencing token of the first key, once issued: always when acquired
   * with `fence: true`, else after the first {@link fence} (or when the
   * grant happened to carry one, as a lock handed over from a queue does).
   * Undefined until then.
   */
  get fencingToken(): number | undefined {
    return this.held[0].fencingToken;
  }

  /**
   * The fencing token of the first key: a number that strictly increases with
   * every new holder of that key, whoever it is. Pass it to the resource you
   * protect and let it reject writes carrying a smaller number than it has
   * seen. Issued by the store on first call, in the same atomic step as a
   * check that the lock is still ours (one round trip; later calls and
   * reentrant holds share it), so locks that never use one pay nothing.
   * Acquired with `fence: true`, the token came with the grant and this
   * resolves it without a round trip.
   *
   * @throws LockLostError when the lock is no longer held and no token was
   *   issued while it was (a token already issued is simply repeated)
   * @throws LockBackendError when the store cannot be reached in bounded time
   */
  fence(): Promise<number> {
    return this.held[0].fence();
  }

  /** {@link fence} for every key, by key. */
  async fences(): Promise<ReadonlyMap<string, number>> {
    const tokens = await Promise.all(this.held.map((h) => h.fence()));
    return new Map(this.held.map((h, i) => [h.name, tokens[i]]));
  }

  /**
   * Local estimate (ms since epoch) of when the earliest lease ends: counted
   * from the send of the command that set it, less an allowance for clock
   * drift, so it errs early. The lock is reported lost at that moment.
   */
  get expiresAt(): number {
    return Math.min(...this.held.map((h) => h.expiresAt));
  }

  /** Aborted, with a `LockLostError` as reason, as soon as any key is known lost. */
  get signal(): AbortSignal {
    this.combinedSignal ??=
      this.held.length === 1
        ? this.held[0].signal
        : AbortSignal.any(this.held.map((h) => h.signal));
    return this.combinedSignal;
  }

  /** Whether the lock is known lost. */
  get lost(): boolean {
    return this.held.some((h) => h.lost);
  }

  /**
   * Sets the remaining lease of every key to `leaseMs`, counted from now.
   * On a watchdog hold (acquired without `leaseTime`) `leaseMs` also becomes
   * the lease the watchdog renews to from then on, every third of it; an
   * explicit lease is set once and then ends ({@link signal} aborts at its
   * end). Resolves false (and aborts {@link signal}) when a key is no longer
   * ours.
   */
  async extend(leaseMs: number): Promise<boolean> {
    if (!(leaseMs > 0) || !Number.isFinite(leaseMs)) {
      throw new RangeError(
        `extend() needs a positive lease in ms, got ${leaseMs}`,
      );
    }
    const results = await Promise.all(this.held.map((h) => h.extend(leaseMs)));
    return results.every(Boolean);
  }

  /**
   * Releases this hold. The keys are freed in the store (and handed to the next
   * waiter) when the outermost reentrant hold is released. Resolves false when
   * the lock had been lost: the other owner's lock is never touched. Calling it
   * again returns the first result.
   */
  release(): Promise<boolean> {
    this.closeScope?.();
    this.releasing ??= this.onRelease(this.held);
    return this.releasing;
  }

  /**
   * Gives this hold up like {@link release}, but leaves its keys taken in the
   * store for `ms` more, after which they expire by themselves: each key's
   * lease is set to `ms` (if still ours) and nothing renews it any more,
   * neither the watchdog nor the process session, so a process that dies
   * meanwhile leaves nothing longer behind. Nobody gets the keys before
   * then, queued waiters included; these are served once the lease ended
   * (on Redis, when the queue's check finds it gone, within
   * `handoffLeaseTime`). Keys shared with an outer hold of the same call
   * chain are only released: the outer hold decides. `ms` of 0 releases at
   * once. Resolves as {@link release} does; calling either again returns the
   * first result. `@DistributedLock`'s `minHoldTime` uses it.
   *
   * @throws RangeError when `ms` is negative or not a finite number
   */
  expireIn(ms: number): Promise<boolean> {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new RangeError(
        `expireIn() needs a non-negative number of ms, got ${String(ms)}`,
      );
    }
    if (this.releasing) return this.releasing;
    if (ms === 0) return this.release();
    this.closeScope?.();
    const own = this.held.filter((h) => h.holds <= 1);
    const shared = this.held.filter((h) => h.holds > 1);
    const outcomes = own.map((h) => h.leaveToExpire(ms));
    if (shared.length > 0) outcomes.push(this.onRelease(shared));
    // The service counts the keys as held until their lease ends, then
    // forgets them (their release sends nothing): closing it meanwhile leaves
    // the process session to lapse rather than ending it, which would free
    // the keys early for any process that checks the holder's session.
    if (own.length > 0) {
      const forget = setTimeout(
        () => void this.onRelease(own).catch(() => undefined),
        ms,
      );
      forget.unref();
    }
    this.releasing = Promise.all(outcomes).then((all) => all.every(Boolean));
    return this.releasing;
  }

  /**
   * Runs `fn` as the holder of this lock: nested acquisitions of these keys
   * inside `fn`'s async call chain are reentrant, and `currentLock()` returns
   * this handle.
   */
  run<T>(fn: () => T): T {
    const outer = lockScope.getStore()?.held;
    const held = new Map(outer);
    for (const h of this.held) held.set(h.scopeKey, h);
    // A released lock opens no scope: nothing would close it.
    if (!this.closeScope && !this.releasing) this.closeScope = openScope();
    return lockScope.run({ held, handle: this }, fn);
  }
}
