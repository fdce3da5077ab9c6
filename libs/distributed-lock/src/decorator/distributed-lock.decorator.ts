import 'reflect-metadata';
import { isObservable, Observable, type Subscription } from 'rxjs';
import { LockTemplateError } from '../errors/lock-errors.js';
import {
  compileLockKeys,
  type CompiledLockKeys,
  type LockKeySource,
} from '../key-template/key-template.js';
import type { LockHandle } from '../lock-service/lock-handle.js';
import type { LockOptions, LockService } from '../lock-service/lock.service.js';
import { lockServiceFor } from './lock-binding.js';

/** Options of {@link DistributedLock}. */
export type DistributedLockOptions = Omit<LockOptions, 'signal'>;

/** Metadata stored on a decorated method. */
export interface DistributedLockMetadata {
  readonly keys: CompiledLockKeys;
  readonly options: DistributedLockOptions;
}

export const DISTRIBUTED_LOCK_METADATA = 'distributed-lock:metadata';

/**
 * Runs the method while holding a distributed lock whose key is built from its
 * arguments: `'coupon:<0>'` uses the first argument as the method receives it
 * (after pipes, for controllers), `'<1.user.id>'` a property path, and a
 * function `(...args) => string | string[]` anything else. Several templates
 * lock several keys, all or nothing.
 *
 * Substituted values are percent-encoded (`encodeKeyPart`), so `1:admin` cannot
 * collide with a literal `:admin` in another template, and braces cannot move a
 * key to another Redis Cluster slot. An argument that is missing, null, empty,
 * or an object throws `LockKeyError` (HTTP 400) and nothing is locked.
 *
 * With `{ fence: true }` the lock comes with its fencing token, which the
 * method reads as `currentLock()?.fencingToken` (see `LockOptions.fence`).
 *
 * The decorated method returns a Promise, or an Observable when its declared
 * return type is `Observable` (the lock is then held until the stream
 * completes, errors or is unsubscribed).
 *
 * Works on controller handlers (HTTP on Express or Fastify, microservice
 * message and event handlers) and on any provider method. Route, guard, pipe
 * and Swagger metadata are kept, whichever side of `@Post()` it is placed.
 *
 * @example
 * ```ts
 * @Post('seckill/:couponId')
 * @DistributedLock('coupon:<0>', { waitTime: 10_000, leaseTime: 30_000 })
 * buy(@Param('couponId', ParseIntPipe) couponId: number) { ... }
 * ```
 */
export function DistributedLock(
  key: LockKeySource | readonly LockKeySource[],
  options: DistributedLockOptions = {},
): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    const className = (target as { constructor: { name: string } }).constructor
      .name;
    const methodName = String(propertyKey);
    const original = descriptor.value as unknown;
    if (typeof original !== 'function') {
      throw new LockTemplateError(
        `@DistributedLock can only decorate methods (${className}.${methodName} is not one)`,
        String(key),
        className,
        methodName,
      );
    }
    const keys = compileLockKeys(key, { className, methodName });
    const parameterTypes = Reflect.getMetadata(
      'design:paramtypes',
      target,
      propertyKey,
    ) as unknown[] | undefined;
    if (parameterTypes && keys.highestArgumentIndex >= parameterTypes.length) {
      throw new LockTemplateError(
        `Lock key template "${keys.description}" on ${className}.${methodName} uses argument ` +
          `<${keys.highestArgumentIndex}>, but the method takes ${parameterTypes.length}`,
        keys.description,
        className,
        methodName,
      );
    }
    const returnsObservable =
      Reflect.getMetadata('design:returntype', target, propertyKey) ===
      Observable;
    const method = original as (...args: unknown[]) => unknown;

    const wrapped = returnsObservable
      ? function (this: unknown, ...args: unknown[]) {
          return lockedObservable(this, method, args, keys, options);
        }
      : function (this: unknown, ...args: unknown[]) {
          return lockedCall(this, method, args, keys, options);
        };

    // Route, guard, interceptor and Swagger decorators keep their metadata on
    // the function itself; without this copy the route would silently vanish.
    for (const metadataKey of Reflect.getOwnMetadataKeys(method)) {
      Reflect.defineMetadata(
        metadataKey,
        Reflect.getOwnMetadata(metadataKey, method),
        wrapped,
      );
    }
    Reflect.defineMetadata(
      DISTRIBUTED_LOCK_METADATA,
      { keys, options },
      wrapped,
    );
    Object.defineProperty(wrapped, 'name', { value: method.name });
    descriptor.value = wrapped as typeof descriptor.value;
    return descriptor;
  };
}

/**
 * Holds the lock around one call. Written as reactions rather than an async
 * function: the lock scope keeps an `AsyncLocalStorage` in use, under which
 * every promise and every await costs a hook call.
 */
function lockedCall(
  instance: unknown,
  method: (...args: unknown[]) => unknown,
  args: unknown[],
  keys: CompiledLockKeys,
  options: DistributedLockOptions,
): Promise<unknown> {
  let service: LockService;
  let acquiring: Promise<LockHandle>;
  try {
    service = lockServiceFor(instance);
    acquiring = service.acquire(keys.resolve(args), options);
  } catch (error) {
    return Promise.reject(error as Error);
  }
  return acquiring.then((handle) => {
    let result: unknown;
    try {
      result = handle.run(() => method.apply(instance, args));
    } catch (error) {
      return service.releaseQuietlyThen(handle, () => {
        throw error;
      });
    }
    // An Observable from a method declared without that return type: hold
    // the lock until the stream ends.
    return Promise.resolve(result).then(
      (value) =>
        isObservable(value)
          ? holdDuring(value, handle, () => service.releaseQuietly(handle))
          : service.releaseQuietlyThen(handle, () => value),
      (error: unknown) =>
        service.releaseQuietlyThen(handle, () => {
          throw error;
        }),
    );
  });
}

function lockedObservable(
  instance: unknown,
  method: (...args: unknown[]) => unknown,
  args: unknown[],
  keys: CompiledLockKeys,
  options: DistributedLockOptions,
): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    const stopWaiting = new AbortController();
    let inner: Subscription | undefined;
    let handle: LockHandle | undefined;
    let finished = false;
    const service = lockServiceFor(instance);
    const release = () => {
      if (handle) void service.releaseQuietly(handle);
    };

    Promise.resolve()
      .then(() =>
        service.acquire(keys.resolve(args), {
          ...options,
          signal: stopWaiting.signal,
        }),
      )
      .then(
        (acquired) => {
          if (finished) {
            void service.releaseQuietly(acquired);
            return;
          }
          handle = acquired;
          try {
            const result = acquired.run(() => method.apply(instance, args));
            const source = isObservable(result) ? result : toObservable(result);
            inner = acquired.run(() => source.subscribe(subscriber));
          } catch (error) {
            subscriber.error(error);
          }
        },
        (error: unknown) => {
          if (!finished) subscriber.error(error);
        },
      );

    return () => {
      finished = true;
      stopWaiting.abort();
      inner?.unsubscribe();
      release();
    };
  });
}

function holdDuring(
  source: Observable<unknown>,
  handle: LockHandle,
  release: () => Promise<void>,
): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    const inner = handle.run(() => source.subscribe(subscriber));
    return () => {
      inner.unsubscribe();
      void release();
    };
  });
}

function toObservable(value: unknown): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    Promise.resolve(value).then(
      (resolved) => {
        subscriber.next(resolved);
        subscriber.complete();
      },
      (error: unknown) => subscriber.error(error),
    );
  });
}
