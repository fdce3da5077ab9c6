/**
 * Shared setup of the read-write lock contract (rwlock-contract.ts): a
 * factory opens "processes", each its own semaphore backend on its own
 * connection to one shared store, each wrapped in its own
 * ReadWriteLockService, as separate instances of an app would be.
 */
import { randomBytes } from 'node:crypto';
import { ReadWriteLockService } from '../../src/rwlock/read-write-lock.service.js';
import type { SemaphoreBackendFactory } from '../semaphore/semaphore-contract.js';

export interface ReadWriteLockFactory extends SemaphoreBackendFactory {
  /**
   * The store's keys that start with `prefix`, when the store can list them
   * (to check that an idle lock leaves only its fencing counter behind).
   */
  keysStartingWith?(prefix: string): Promise<readonly string[]>;
}

/** Three services on one store and a fresh lock name, per test. */
export interface ReadWriteLockWorld {
  readonly services: readonly ReadWriteLockService[];
  readonly name: string;
}

/** Opens a world before each test and closes it after. */
export function useReadWriteLockWorld(
  factory: ReadWriteLockFactory,
): () => ReadWriteLockWorld {
  let world: ReadWriteLockWorld | undefined;
  let closeAll: (() => Promise<void>) | undefined;
  beforeEach(async () => {
    const opened = await factory.open(3);
    world = {
      services: opened.backends.map(
        (backend) =>
          new ReadWriteLockService({
            backend,
            keyPrefix: 'rwcontract:',
            leaseTime: 1_000,
            waitTime: 0,
            maxKeyLength: 200,
          }),
      ),
      name: `price-${randomBytes(4).toString('hex')}`,
    };
    closeAll = opened.close;
  });
  afterEach(async () => {
    await closeAll?.();
  });
  return () => world!;
}

export async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}
