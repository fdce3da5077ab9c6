import type { HeldKey } from '../lock-service/held-key.js';
import type { ReadWriteLockMode } from './rwlock-errors.js';
import { runHolding } from './rwlock-scope.js';

/**
 * A read or write hold of a read-write lock by this process. Release it
 * exactly once, in a `finally` (or use `run`, `withRead` or `withWrite`,
 * which do).
 */
export class ReadWriteLockHandle {
  private releasing?: Promise<boolean>;

  /** @internal Created by ReadWriteLockService. */
  constructor(
    /** The side this call asked for. */
    readonly mode: ReadWriteLockMode,
    /** The lock's name, without prefix. */
    readonly name: string,
    private readonly held: HeldKey,
    /** The side the store granted: `write` when a read joined a write hold. */
    private readonly heldMode: ReadWriteLockMode,
    private readonly onRelease: (held: HeldKey) => Promise<boolean>,
    /**
     * True when this hold joined one the same call chain held already (a
     * read or write inside a write hold, a read inside a read hold): it cost
     * no round trip, and the lock is freed with the outer hold.
     */
    readonly reentrant = false,
  ) {}

  /** The random owner token of the hold (shared by reentrant holds). */
  get token(): string {
    return this.held.token;
  }

  /**
   * The write hold's fencing token: a number that strictly increases with
   * every writer of this lock, also across spells when nobody holds it. It
   * came with the grant (no extra round trip). Pass it to the resource you
   * protect and let it reject writes carrying a smaller number than it has
   * seen. Undefined for a read hold (readers share the lock and get none); a
   * read joined to the chain's write hold has the writer's.
   */
  get fencingToken(): number | undefined {
    return this.heldMode === 'write' ? this.held.fencingToken : undefined;
  }

  /** Aborted, with a `LockLostError` as reason, once the hold is known lost. */
  get signal(): AbortSignal {
    return this.held.signal;
  }

  /** Whether the hold is known lost (lease ran out, renewals failed). */
  get lost(): boolean {
    return this.held.lost;
  }

  /** Local estimate (ms since epoch) of when the lease ends; errs early. */
  get expiresAt(): number {
    return this.held.expiresAt;
  }

  /**
   * Sets the remaining lease to `leaseMs` from now (on a watchdog hold, also
   * the lease renewed to from then on). False (and {@link signal} aborted)
   * when the hold is no longer ours.
   *
   * @throws RangeError when `leaseMs` is not a positive finite number
   */
  extend(leaseMs: number): Promise<boolean> {
    if (!(leaseMs > 0) || !Number.isFinite(leaseMs))
      return Promise.reject(
        new RangeError(`extend() needs a positive lease in ms, got ${leaseMs}`),
      );
    return this.held.extend(leaseMs);
  }

  /**
   * Releases this hold. The lock is given back in the store (and the queue
   * served) when the outermost hold of the chain is released. False when
   * the hold had been lost (nobody else's hold is touched). Calling it
   * again returns the first result.
   */
  release(): Promise<boolean> {
    this.releasing ??= this.onRelease(this.held);
    return this.releasing;
  }

  /**
   * Runs `fn` with the hold's {@link signal} as the holder of this lock, and
   * releases the hold when `fn` settles. Inside `fn`'s async call chain a
   * `read()` or `write()` of the same lock is reentrant (after a read hold,
   * `write()` throws `LockUpgradeError`).
   */
  async run<T>(fn: (signal: AbortSignal) => T | Promise<T>): Promise<T> {
    try {
      return await runHolding(
        { held: this.held, mode: this.heldMode },
        this,
        () => fn(this.signal),
      );
    } finally {
      await this.release().catch(() => false);
    }
  }
}
