import { Logger } from '@nestjs/common';
import { LockNotAcquiredError } from '../errors/lock-errors.js';
import type { CompiledLockKeys } from '../key-template/key-template.js';
import { monotonicNow } from '../lease/lease-clock.js';
import type { LockHandle } from '../lock-service/lock-handle.js';
import type { LockOptions, LockService } from '../lock-service/lock.service.js';

/** What a decorated method does when its lock is still busy after `waitTime`. */
export type OnBusy = 'throw' | 'skip';

/**
 * Gives a call's wait its `AbortSignal`: called with the decorated method's
 * arguments and `this` bound to the instance (write it as a method, not an
 * arrow function, to reach the instance's services).
 */
export type LockSignalSource = (
  this: never,
  ...args: never[]
) => AbortSignal | undefined;

/** Options of `@DistributedLock`: those of `LockService.acquire`, and three of its own. */
export interface DistributedLockOptions extends Omit<LockOptions, 'signal'> {
  /**
   * Stops a call's wait for the lock when the signal it returns aborts: the
   * call rejects with `LockNotAcquiredError` whose `cause` is the signal's
   * reason, and the method does not run. Called on every call, before the
   * lock is asked for, with the method's arguments and `this` bound to the
   * instance; return undefined to wait as usual. For waits that became
   * pointless: the item sold out, the request was cancelled. A signal that
   * aborts after the lock was granted changes nothing. Default: none.
   */
  readonly signal?: LockSignalSource;
  /**
   * When the lock is still busy after `waitTime`: `'throw'` rejects with
   * `LockNotAcquiredError` (409 through the interceptor); `'skip'` runs
   * nothing and resolves `undefined` (an Observable completes empty),
   * logging at debug level only. `'skip'` is for scheduled jobs (`@Cron`,
   * `@Interval`) and event handlers that one instance at a time should run
   * while the others let the turn go; its `waitTime` defaults to 0. The app
   * does not start with `'skip'` on an HTTP route or a `@MessagePattern`
   * handler, whose caller would get an empty success. Default `'throw'`.
   */
  readonly onBusy?: OnBusy;
  /**
   * Keeps the lock at least this many ms from its acquisition, however soon
   * the method returns: the keys are then left to expire at that moment,
   * no longer renewed by this process or its session (a process killed
   * after its method returned blocks nobody longer), and nobody, queued
   * waiters included, gets them before. With `onBusy: 'skip'` on a scheduled
   * method it makes each tick run once across instances: those whose tick
   * fires a little later find the lock still held and skip. It must exceed
   * how far apart one tick fires on the instances (timer lateness, clock
   * skew) and stay below the time to the next tick less that spread: half
   * the period for `@Cron`, a little under the interval for `@Interval`.
   * A method running longer than it releases when it returns. At most an
   * explicit `leaseTime`. Default 0: released when the method returns.
   */
  readonly minHoldTime?: number;
}

/** One decorated method's lock, checked when its class is defined. */
export interface DecoratedLock {
  readonly keys: CompiledLockKeys;
  /** What each call passes to `LockService.acquire`. */
  readonly acquireOptions: Omit<LockOptions, 'signal'>;
  readonly minHoldTime: number;
  /** `Class.method`, for the log. */
  readonly label: string;
  /**
   * The rejection handler of a call's acquisition with `onBusy: 'skip'`:
   * busy resolves undefined, anything else rethrows. Undefined with `'throw'`.
   */
  readonly skipWhenBusy?: (error: unknown) => undefined;
  /** The `signal` option, bound to a call. Undefined without one. */
  readonly signalFor?: (
    instance: unknown,
    args: unknown[],
  ) => AbortSignal | undefined;
}

const logger = new Logger('DistributedLock');

/**
 * Checks the options of `@DistributedLock` on `label` (`Class.method`).
 * `leaseTime`, `waitTime` and `fence` are checked by the service on each
 * call, as for `LockService.acquire`.
 *
 * @throws TypeError for an `onBusy` other than 'throw' or 'skip', or a
 *   `minHoldTime` that is not a number
 * @throws RangeError for a negative or infinite `minHoldTime`, or one above
 *   the explicit `leaseTime`
 */
export function decoratedLock(
  keys: CompiledLockKeys,
  options: DistributedLockOptions,
  label: string,
): DecoratedLock {
  if (typeof options !== 'object' || options === null)
    throw new TypeError(
      `@DistributedLock on ${label}: options must be an object, got ${String(options)}`,
    );
  const { onBusy = 'throw', minHoldTime = 0, signal, ...given } = options;
  // Metrics and traces name the lock by its template, not by its keys.
  const acquireOptions = { name: keys.description, ...given };
  if (onBusy !== 'throw' && onBusy !== 'skip')
    throw new TypeError(
      `@DistributedLock on ${label}: onBusy must be 'throw' or 'skip', got ${String(onBusy)}`,
    );
  if (typeof minHoldTime !== 'number')
    throw new TypeError(
      `@DistributedLock on ${label}: minHoldTime must be a number of ms, got ${String(minHoldTime)}`,
    );
  if (!Number.isFinite(minHoldTime) || minHoldTime < 0)
    throw new RangeError(
      `@DistributedLock on ${label}: minHoldTime must be a non-negative number of ms, got ${minHoldTime}`,
    );
  const { leaseTime } = acquireOptions;
  if (typeof leaseTime === 'number' && minHoldTime > leaseTime)
    throw new RangeError(
      `@DistributedLock on ${label}: minHoldTime (${minHoldTime} ms) must not exceed leaseTime (${leaseTime} ms), which would end the lock first`,
    );
  if (signal !== undefined && typeof signal !== 'function')
    throw new TypeError(
      `@DistributedLock on ${label}: signal must be a function of the method's arguments that returns an AbortSignal, got ${String(signal)}`,
    );
  const signalFor = signal && signalSource(signal, label);
  if (onBusy === 'throw')
    return { keys, acquireOptions, minHoldTime, label, signalFor };
  const lock: DecoratedLock = {
    keys,
    // Skipping is for whoever comes second: waiting would run the turn again.
    acquireOptions: { waitTime: 0, ...acquireOptions },
    minHoldTime,
    label,
    signalFor,
    skipWhenBusy: (error) => {
      if (!skipsFor(lock, error)) throw error;
      return undefined;
    },
  };
  return lock;
}

/** Calls the `signal` option for one call and checks what it returned. */
function signalSource(
  source: LockSignalSource,
  label: string,
): (instance: unknown, args: unknown[]) => AbortSignal | undefined {
  const call = source as (...args: unknown[]) => unknown;
  return (instance, args) => {
    const signal = call.apply(instance, args);
    if (signal === undefined || signal instanceof AbortSignal) return signal;
    throw new TypeError(
      `@DistributedLock on ${label}: the signal option returned ${String(signal)}, not an AbortSignal or undefined`,
    );
  };
}

/**
 * Whether `error` ends the call as a skipped turn (`onBusy: 'skip'` and the
 * lock busy), which it then logs at debug level.
 */
export function skipsFor(lock: DecoratedLock, error: unknown): boolean {
  if (!lock.skipWhenBusy || !(error instanceof LockNotAcquiredError))
    return false;
  logger.debug(`${lock.label} skipped: lock "${error.key}" is busy`);
  return true;
}

/**
 * The moment (monotonic ms) a new hold starts counting towards
 * `minHoldTime`; undefined without one, so the common path reads no clock.
 */
export function acquisitionTime(lock: DecoratedLock): number | undefined {
  return lock.minHoldTime > 0 ? monotonicNow() : undefined;
}

/**
 * Releases `handle` as `LockService.releaseQuietlyThen` does (a failure is
 * logged, and the call settles as `outcome`), but keeps its keys until
 * `minHoldTime` after `acquiredAt`: whatever is left of it, they are left
 * to expire (`LockHandle.expireIn`).
 */
export function releaseThen<T>(
  service: LockService,
  handle: LockHandle,
  lock: DecoratedLock,
  acquiredAt: number | undefined,
  outcome: () => T,
): Promise<T> {
  if (acquiredAt !== undefined) {
    const left = lock.minHoldTime - (monotonicNow() - acquiredAt);
    // The release below answers what this started, failures included.
    if (left > 0) void handle.expireIn(left);
  }
  return service.releaseQuietlyThen(handle, outcome);
}
