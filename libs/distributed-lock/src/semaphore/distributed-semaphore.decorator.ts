import 'reflect-metadata';
import { LockTemplateError } from '../errors/lock-errors.js';
import {
  compileLockKeys,
  type LockKeySource,
} from '../key-template/key-template.js';
import { semaphoreServiceForCall } from './semaphore-binding.js';
import { replaceMethod } from '../decorator/replace-method.js';

/** Options of `@DistributedSemaphore`. */
export interface DistributedSemaphoreOptions {
  /** Permits the semaphore has in all: at most this many calls at once. */
  readonly permits: number;
  /** Permits each call takes. Default 1. */
  readonly take?: number;
  /** How long a call waits for a permit, in ms. Default: the module's `waitTime`. */
  readonly waitTime?: number;
  /** Explicit lease in ms; omitted, a watchdog renews it (see `SemaphoreOptions`). */
  readonly leaseTime?: number;
}

export const DISTRIBUTED_SEMAPHORE_METADATA = 'distributed-semaphore:metadata';

/**
 * Runs the method holding `take` of `permits` permits of the semaphore whose
 * name is built from its arguments like a `@DistributedLock` key (`'<0>'`
 * placeholders, percent-encoded). Still busy after `waitTime`: rejects with
 * `SemaphoreNotAcquiredError`, a `LockNotAcquiredError` (HTTP 409 through
 * the interceptor). The decorated method returns a Promise.
 *
 * @example
 * ```ts
 * @DistributedSemaphore('partner-api', { permits: 10, waitTime: 2_000 })
 * callPartner(order: Order) { ... }
 * ```
 */
export function DistributedSemaphore(
  key: LockKeySource,
  options: DistributedSemaphoreOptions,
): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    const className = (target as { constructor: { name: string } }).constructor
      .name;
    const methodName = String(propertyKey);
    const original = descriptor.value as unknown;
    const fail = (message: string) =>
      new LockTemplateError(message, String(key), className, methodName);
    if (typeof original !== 'function')
      throw fail(
        `@DistributedSemaphore can only decorate methods (${className}.${methodName} is not one)`,
      );
    if (typeof options !== 'object' || options === null)
      throw fail(
        `@DistributedSemaphore on ${className}.${methodName}: options with \`permits\` are required`,
      );
    const { permits, take = 1, waitTime, leaseTime } = options;
    if (!Number.isSafeInteger(permits) || permits < 1)
      throw fail(
        `@DistributedSemaphore on ${className}.${methodName}: permits must be a positive whole number, got ${String(permits)}`,
      );
    if (!Number.isSafeInteger(take) || take < 1 || take > permits)
      throw fail(
        `@DistributedSemaphore on ${className}.${methodName}: take must be a whole number from 1 to permits, got ${String(take)}`,
      );
    const keys = compileLockKeys(key, { className, methodName });
    const method = original as (...args: unknown[]) => unknown;
    const wrapped = async function (this: unknown, ...args: unknown[]) {
      const names = keys.resolve(args);
      if (names.length !== 1)
        throw fail(
          `@DistributedSemaphore on ${className}.${methodName}: the key must name one semaphore, got ${names.length}`,
        );
      const service = semaphoreServiceForCall();
      const handle = await service.acquire(names[0], {
        limit: permits,
        permits: take,
        ...(waitTime !== undefined && { waitTime }),
        ...(leaseTime !== undefined && { leaseTime }),
      });
      return handle.run(() => method.apply(this, args));
    };
    return replaceMethod(
      descriptor,
      method,
      wrapped,
      DISTRIBUTED_SEMAPHORE_METADATA,
      {
        keys,
        options,
      },
    );
  };
}
