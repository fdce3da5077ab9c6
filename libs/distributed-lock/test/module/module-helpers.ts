import type { ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Redis } from 'ioredis';

/**
 * Starts application contexts for the tests of one file, and closes after
 * each test whatever a test left open (a failed one included).
 */
export function useAppContexts(): {
  start(metadata: ModuleMetadata): Promise<TestingModule>;
  stop(app: TestingModule): Promise<void>;
} {
  const running = new Set<TestingModule>();
  afterEach(async () => {
    await Promise.all([...running].map((app) => app.close().catch(() => {})));
    running.clear();
  });
  return {
    async start(metadata) {
      const app = await Test.createTestingModule(metadata).compile();
      running.add(app);
      await app.init();
      return app;
    },
    async stop(app) {
      running.delete(app);
      await app.close();
    },
  };
}

/** Resolves after `ms`, or rejects with a clear message when `promise` takes longer. */
export async function within<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not settle within ${ms} ms`)),
      ms,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The settled outcome of `promise` and how long it took, in ms. */
export async function timed<T>(
  promise: Promise<T>,
): Promise<{ value?: T; error?: unknown; elapsedMs: number }> {
  const startedAt = Date.now();
  try {
    const value = await promise;
    return { value, elapsedMs: Date.now() - startedAt };
  } catch (error) {
    return { error, elapsedMs: Date.now() - startedAt };
  }
}

/** Ids of the server's client connections other than `observer`'s own. */
export async function otherConnections(observer: Redis): Promise<string[]> {
  const own = String(await observer.client('ID'));
  const list = String(await observer.client('LIST'));
  return list
    .split('\n')
    .map((line) => /(?:^|\s)id=(\d+)/.exec(line)?.[1])
    .filter((id): id is string => id !== undefined && id !== own);
}

/** A promise with its resolver, to hold a handler until the test lets it go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
