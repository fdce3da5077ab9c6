import type { LockBackend } from '../backends/lock-backend.js';
import { validateLockKey } from '../key-template/lock-key-rules.js';
import type { LockObserver } from '../telemetry/lock-observer.js';

/** Per-call options of `LockService.acquire` and friends. */
export interface LockOptions {
  /**
   * Lease in ms. Given: the lock expires after it and is never renewed, also
   * when its holder dies (no crash recovery before then). Omitted: the lock
   * is bound to the process's session, and freed within the session's TTL if
   * the process dies (or, with sessions off, a watchdog renews its lease).
   */
  readonly leaseTime?: number;
  /** How long to wait for a busy lock, in ms; 0 tries once. */
  readonly waitTime?: number;
  /** Aborting it stops waiting. */
  readonly signal?: AbortSignal;
  /**
   * Issue each key's fencing token with the grant: when `acquire` resolves,
   * `LockHandle.fencingToken` is set and `fence()` answers without a
   * round trip. The store issues it in the same atomic step as the grant
   * where it can (on one Redis, in the acquiring command itself); otherwise
   * it is asked for before `acquire` resolves. A reentrant hold shares the
   * outer hold's token. Default false: the token is issued on the first
   * `fence()`, so locks that never use one pay nothing.
   */
  readonly fence?: boolean;
  /**
   * The name metrics and traces report this lock under: a few distinct
   * values, like a key template (`'coupon:<id>'`), never a key. Default:
   * the decorator's key template, or for a direct call the key with all
   * after its first `:` as `*` (`coupon:42` → `coupon:*`).
   */
  readonly name?: string;
}

/** Settings the service runs with (the module fills them from its options). */
export interface LockServiceSettings {
  readonly backend: LockBackend;
  /** Prefix of every lock key in the store. */
  readonly keyPrefix: string;
  /** Default explicit lease; undefined means watchdog. */
  readonly leaseTime?: number;
  /** Lease kept alive by the watchdog, when the hold is bound to no session. */
  readonly watchdogLeaseTime: number;
  /**
   * TTL of the process session, in ms. Holds without an explicit lease are
   * bound to it when the backend keeps sessions. Undefined: no session;
   * such holds renew their own lease (`watchdogLeaseTime`).
   */
  readonly sessionTtl?: number;
  /** Default wait. */
  readonly waitTime: number;
  readonly maxKeyLength: number;
  /** Told of acquisitions, holds and losses, for metrics and traces. Default: none. */
  readonly observer?: LockObserver;
}

/** `value`, checked to be a (positive, unless `zeroAllowed`) number of ms. */
export function checkedMs(
  name: string,
  value: number,
  zeroAllowed: boolean,
): number {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < 0 ||
    (!zeroAllowed && value === 0)
  ) {
    throw new RangeError(
      `${name} must be a ${zeroAllowed ? 'non-negative' : 'positive'} number of ms, got ${String(value)}`,
    );
  }
  return value;
}

/** `value`, checked to be a boolean; undefined is false. */
export function checkedFlag(name: string, value: boolean | undefined): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean')
    throw new TypeError(`${name} must be true or false, got ${String(value)}`);
  return value;
}

/** `value`, checked to be a non-empty string of at most 200 characters, or undefined. */
export function checkedName(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > 200)
    throw new TypeError(
      `name must be a non-empty string of at most 200 characters, got ${String(value)}`,
    );
  return value;
}

/** The keys of one acquisition, validated, deduplicated and in canonical order. */
export function canonicalKeys(
  keyOrKeys: string | readonly string[],
  maxKeyLength: number,
): string[] {
  // One key (the common case) needs no sorting or deduplication.
  const single =
    typeof keyOrKeys === 'string'
      ? keyOrKeys
      : keyOrKeys.length === 1
        ? keyOrKeys[0]
        : undefined;
  if (single !== undefined) return [validateLockKey(single, maxKeyLength)];
  const keys = [...keyOrKeys];
  if (keys.length === 0)
    throw new RangeError('acquire() needs at least one key');
  const valid = keys.map((key) => validateLockKey(key, maxKeyLength));
  return [...new Set(valid)].toSorted();
}
