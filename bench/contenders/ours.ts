import 'reflect-metadata';
import { Injectable, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  DistributedLock,
  DistributedLockModule,
  LockHandle,
  LockService,
  ReadWriteLockService,
  SemaphoreService,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import type {
  ContenderInstance,
  ContenderModule,
  HeldLock,
  OpenContender,
} from './types.js';

/** Root module of the benchmark's application contexts (everything comes from forRoot). */
@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
class BenchRootModule {}

/** A tiny Nest application context with the lock module, as an app would have it. */
export async function createContext(
  options: DistributedLockModuleOptions,
  providers: DynamicModule['providers'] = [],
) {
  const root: DynamicModule = {
    module: BenchRootModule,
    imports: [DistributedLockModule.forRoot(options)],
    providers,
  };
  return NestFactory.createApplicationContext(root, {
    logger: false,
    abortOnError: false,
  });
}

/**
 * `LockService.acquire()` / `handle.release()` in a context of its own with
 * the module `options` (e.g. H's Sentinel and Cluster deployments); see
 * {@link openers} for `perCallLease` and `fenced`.
 */
export async function lockServiceOn(
  options: DistributedLockModuleOptions,
  perCallLease = false,
  fenced = false,
): Promise<ContenderInstance> {
  const app = await createContext(options);
  const locks = app.get(LockService);
  return {
    async acquire(key, { ttlMs, signal }): Promise<HeldLock> {
      const handle = await locks.acquire(key, {
        signal,
        ...(perCallLease ? { leaseTime: ttlMs } : {}),
        ...(fenced ? { fence: true } : {}),
      });
      // With `fence: true` the token comes with the grant, read as a caller
      // that asked for it reads it; a grant without one is a failure here.
      if (fenced && handle.fencingToken === undefined)
        throw new Error('fence: true granted the lock without its token');
      return {
        release: async () => {
          await handle.release();
        },
      };
    },
    close: () => app.close(),
  };
}

/** Lets the benchmark decide, from outside, when a decorated method returns. */
interface Gate {
  enter(): void;
  readonly done: Promise<void>;
}

@Injectable()
class LockedWork {
  @DistributedLock('<0>')
  async hold(key: string, gate: Gate): Promise<void> {
    gate.enter();
    await gate.done;
  }
}

/**
 * Through `@DistributedLock('<0>')` on a provider method: "acquired" is the
 * moment the method body starts, "released" the moment the call resolves.
 */
const openDecorator: OpenContender = async ({ urls }) => {
  const app = await createContext({ redis: urls[0] }, [LockedWork]);
  const work = app.get(LockedWork);
  return {
    acquire(key): Promise<HeldLock> {
      return new Promise<HeldLock>((resolve, reject) => {
        let open!: () => void;
        const done = new Promise<void>((r) => (open = r));
        let entered = false;
        const call = work.hold(key, {
          enter: () => {
            entered = true;
            resolve({
              release: () => {
                open();
                return call;
              },
            });
          },
          done,
        });
        call.catch((error: unknown) => {
          if (!entered) reject(error as Error);
        });
      });
    },
    close: () => app.close(),
  };
};

/**
 * A diagnostic, not a configuration users have: the decorator with its lock
 * scope switched off in this worker process (`LockHandle.run` calls the
 * method directly, so no `AsyncLocalStorage` is ever enabled), which leaves
 * `currentLock()` and reentrancy without their scope. Beside
 * `ours-decorator` in the same turns it shows what the scope costs on this
 * Node.
 */
function runUnscoped<T>(this: LockHandle, fn: () => T): T {
  return fn();
}

/** {@link runUnscoped} for every handle of this worker, then the decorator. */
const openUnscopedDecorator: OpenContender = (context) => {
  LockHandle.prototype.run = runUnscoped;
  return openDecorator(context);
};

/**
 * I: one permit of a `limit`-permit semaphore through
 * `SemaphoreService.acquire()` / `handle.release()`, at the module defaults
 * (watchdog lease, FIFO queue with pub/sub wake-ups).
 */
const openSemaphore: OpenContender = async ({ urls }) => {
  const app = await createContext({ redis: urls[0] });
  const semaphores = app.get(SemaphoreService);
  return {
    async acquire(key, { signal, limit }): Promise<HeldLock> {
      if (limit === undefined) throw new Error('ours-semaphore needs a limit');
      const handle = await semaphores.acquire(key, {
        limit,
        permits: 1,
        signal,
      });
      return {
        release: async () => {
          await handle.release();
        },
      };
    },
    close: () => app.close(),
  };
};

/**
 * J: a read or write hold (as the loop drew) of one read-write lock through
 * `ReadWriteLockService.read()` / `write()` and `handle.release()`, at the
 * module defaults (watchdog lease, FIFO queue with pub/sub wake-ups).
 */
const openReadWriteLock: OpenContender = async ({ urls }) => {
  const app = await createContext({ redis: urls[0] });
  const locks = app.get(ReadWriteLockService);
  return {
    async acquire(key, { signal, mode }): Promise<HeldLock> {
      if (mode === undefined) throw new Error('ours-rwlock needs a mode');
      const handle =
        mode === 'write'
          ? await locks.write(key, { signal })
          : await locks.read(key, { signal });
      return {
        release: async () => {
          await handle.release();
        },
      };
    },
    close: () => app.close(),
  };
};

/**
 * Through `LockService.acquire()` / `handle.release()` (the fenced one also
 * takes the fencing token of every hold, with `fence: true`, as code guarding
 * a resource with it would), and through the decorator.
 */
export const openers: ContenderModule['openers'] = {
  'ours-service': ({ urls }) => lockServiceOn({ redis: urls[0] }),
  'ours-service-lease': ({ urls }) => lockServiceOn({ redis: urls[0] }, true),
  'ours-service-fenced': ({ urls }) =>
    lockServiceOn({ redis: urls[0] }, false, true),
  'ours-service-uncoalesced': ({ urls }) =>
    lockServiceOn({ redis: urls[0], coalesceWrites: false }),
  // Explicit leases, as the Redlock peers use.
  'ours-quorum': ({ urls }) => lockServiceOn({ nodes: [...urls] }, true),
  'ours-decorator': openDecorator,
  'ours-decorator-unscoped': openUnscopedDecorator,
  'ours-semaphore': openSemaphore,
  'ours-rwlock': openReadWriteLock,
  // J: the mutex for reads and writes alike (it ignores the mode).
  'ours-rwlock-mutex': ({ urls }) => lockServiceOn({ redis: urls[0] }),
};
