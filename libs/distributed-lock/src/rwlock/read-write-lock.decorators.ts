import 'reflect-metadata';
import { replaceMethod } from '../decorator/replace-method.js';
import { LockTemplateError } from '../errors/lock-errors.js';
import {
  compileLockKeys,
  type LockKeySource,
} from '../key-template/key-template.js';
import type { ReadWriteLockMode } from './rwlock-errors.js';
import { readWriteLockServiceForCall } from './rwlock-binding.js';

/** Options of `@ReadLock` and `@WriteLock`. */
export interface ReadWriteLockDecoratorOptions {
  /** How long a call waits for the lock, in ms. Default: the module's `waitTime`. */
  readonly waitTime?: number;
  /** Explicit lease in ms; omitted, a watchdog renews it (see `ReadWriteLockOptions`). */
  readonly leaseTime?: number;
}

export const READ_WRITE_LOCK_METADATA = 'read-write-lock:metadata';

/**
 * Runs the method holding the read lock whose name is built from its
 * arguments like a `@DistributedLock` key (`'<0>'` placeholders,
 * percent-encoded): calls share it with other readers, and wait for
 * writers. Still busy after `waitTime`: rejects with
 * `ReadWriteLockNotAcquiredError`, a `LockNotAcquiredError` (HTTP 409
 * through the interceptor). The decorated method returns a Promise.
 *
 * @example
 * ```ts
 * @ReadLock('price:<0>', { waitTime: 2_000 })
 * getPrice(sku: string) { ... }
 * ```
 */
export function ReadLock(
  key: LockKeySource,
  options: ReadWriteLockDecoratorOptions = {},
): MethodDecorator {
  return readWriteLockDecorator('read', key, options);
}

/**
 * Runs the method holding the write lock whose name is built from its
 * arguments (see {@link ReadLock}): alone, with no reader or other writer.
 * Inside the method, `currentReadWriteLock()?.fencingToken` is the hold's
 * fencing token. Busy after `waitTime`: as {@link ReadLock}.
 *
 * @example
 * ```ts
 * @WriteLock('price:<0>')
 * setPrice(sku: string, price: number) { ... }
 * ```
 */
export function WriteLock(
  key: LockKeySource,
  options: ReadWriteLockDecoratorOptions = {},
): MethodDecorator {
  return readWriteLockDecorator('write', key, options);
}

function readWriteLockDecorator(
  mode: ReadWriteLockMode,
  key: LockKeySource,
  options: ReadWriteLockDecoratorOptions,
): MethodDecorator {
  const decorator = mode === 'read' ? '@ReadLock' : '@WriteLock';
  return (target, propertyKey, descriptor) => {
    const className = (target as { constructor: { name: string } }).constructor
      .name;
    const methodName = String(propertyKey);
    const original = descriptor.value as unknown;
    const fail = (message: string) =>
      new LockTemplateError(message, String(key), className, methodName);
    if (typeof original !== 'function')
      throw fail(
        `${decorator} can only decorate methods (${className}.${methodName} is not one)`,
      );
    if (typeof options !== 'object' || options === null)
      throw fail(
        `${decorator} on ${className}.${methodName}: options must be an object`,
      );
    const { waitTime, leaseTime } = options;
    const keys = compileLockKeys(key, { className, methodName });
    const method = original as (...args: unknown[]) => unknown;
    const wrapped = async function (this: unknown, ...args: unknown[]) {
      const names = keys.resolve(args);
      if (names.length !== 1)
        throw fail(
          `${decorator} on ${className}.${methodName}: the key must name one lock, got ${names.length}`,
        );
      const service = readWriteLockServiceForCall(decorator);
      const lockOptions = {
        ...(waitTime !== undefined && { waitTime }),
        ...(leaseTime !== undefined && { leaseTime }),
      };
      const handle =
        mode === 'read'
          ? await service.read(names[0], lockOptions)
          : await service.write(names[0], lockOptions);
      return handle.run(() => method.apply(this, args));
    };
    return replaceMethod(
      descriptor,
      method,
      wrapped,
      READ_WRITE_LOCK_METADATA,
      {
        mode,
        keys,
        options,
      },
    );
  };
}
