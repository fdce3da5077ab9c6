import 'reflect-metadata';
import { isObservable, Observable, type Subscription } from 'rxjs';
import { LockTemplateError } from '../errors/lock-errors.js';
import {
  compileLockKeys,
  type CompiledLockKeys,
  type LockKeySource,
} from '../key-template/key-template.js';
import type { LockHandle } from '../lock-service/lock-handle.js';
import type { LockService } from '../lock-service/lock.service.js';
import {
  acquisitionTime,
  decoratedLock,
  releaseThen,
  skipsFor,
  type DecoratedLock,
  type DistributedLockOptions,
} from './decorated-lock.js';
import { lockServiceFor } from './lock-binding.js';
import { replaceMethod } from './replace-method.js';

export type {
  DistributedLockOptions,
  LockSignalSource,
  OnBusy,
} from './decorated-lock.js';

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
 * On a scheduled job, `{ onBusy: 'skip', minHoldTime }` runs each tick on
 * one instance: the others find the lock busy and skip it quietly (see
 * {@link DistributedLockOptions}). It goes above or below `@Cron` /
 * `@Interval`.
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
 *
 * @Cron(CronExpression.EVERY_MINUTE)
 * @DistributedLock('carts:expire', { onBusy: 'skip', minHoldTime: 30_000 })
 * expireCarts() { ... }
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
    const lock = decoratedLock(keys, options, `${className}.${methodName}`);

    const wrapped = returnsObservable
      ? function (this: unknown, ...args: unknown[]) {
          return lockedObservable(this, method, args, lock);
        }
      : function (this: unknown, ...args: unknown[]) {
          return lockedCall(this, method, args, lock);
        };

    return replaceMethod(
      descriptor,
      method,
      wrapped,
      DISTRIBUTED_LOCK_METADATA,
      {
        keys,
        options,
      },
    );
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
  lock: DecoratedLock,
): Promise<unknown> {
  let service: LockService;
  let acquiring: Promise<LockHandle>;
  try {
    service = lockServiceFor(instance);
    const signal = lock.signalFor?.(instance, args);
    acquiring = service.acquire(
      lock.keys.resolve(args),
      signal ? { ...lock.acquireOptions, signal } : lock.acquireOptions,
    );
  } catch (error) {
    return Promise.reject(error as Error);
  }
  return acquiring.then((handle) => {
    const acquiredAt = acquisitionTime(lock);
    const giveBack = <T>(outcome: () => T) =>
      releaseThen(service, handle, lock, acquiredAt, outcome);
    let result: unknown;
    try {
      result = handle.run(() => method.apply(instance, args));
    } catch (error) {
      return giveBack(() => {
        throw error;
      });
    }
    // An Observable from a method declared without that return type: hold
    // the lock until the stream ends.
    return Promise.resolve(result).then(
      (value) =>
        isObservable(value)
          ? holdDuring(value, handle, () => giveBack(() => undefined))
          : giveBack(() => value),
      (error: unknown) =>
        giveBack(() => {
          throw error;
        }),
    );
  }, lock.skipWhenBusy);
}

function lockedObservable(
  instance: unknown,
  method: (...args: unknown[]) => unknown,
  args: unknown[],
  lock: DecoratedLock,
): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    const stopWaiting = new AbortController();
    let inner: Subscription | undefined;
    let handle: LockHandle | undefined;
    let acquiredAt: number | undefined;
    let finished = false;
    const service = lockServiceFor(instance);
    const release = () => {
      if (handle)
        void releaseThen(service, handle, lock, acquiredAt, () => undefined);
    };

    Promise.resolve()
      .then(() => {
        const given = lock.signalFor?.(instance, args);
        return service.acquire(lock.keys.resolve(args), {
          ...lock.acquireOptions,
          signal: given
            ? AbortSignal.any([stopWaiting.signal, given])
            : stopWaiting.signal,
        });
      })
      .then(
        (acquired) => {
          if (finished) {
            void service.releaseQuietly(acquired);
            return;
          }
          handle = acquired;
          acquiredAt = acquisitionTime(lock);
          try {
            const result = acquired.run(() => method.apply(instance, args));
            const source = isObservable(result) ? result : toObservable(result);
            inner = acquired.run(() => source.subscribe(subscriber));
          } catch (error) {
            subscriber.error(error);
          }
        },
        (error: unknown) => {
          if (finished) return;
          if (skipsFor(lock, error)) subscriber.complete();
          else subscriber.error(error);
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
