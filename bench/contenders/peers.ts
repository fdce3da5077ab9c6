import type { Redis } from 'ioredis';
import IORedis4 from 'ioredis4';
import Redlock4 from 'redlock4';
import Redlock5 from 'redlock5';
import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock';
import { Mutex, RedlockMutex, Semaphore } from 'redis-semaphore';
import { connectIoredis, quitAll } from './clients.js';
import type {
  ContenderInstance,
  ContenderModule,
  HeldLock,
  OpenContender,
} from './types.js';

/**
 * "Tuned" peers: retry delay 10 ms (jitter 5 ms, half the delay like the
 * defaults' 100/200), and 200 retries so the wait budget stays about the
 * defaults' 2 s (10 retries x 200 ms).
 */
const tunedRedlock = { retryDelay: 10, retryJitter: 5, retryCount: 200 };

async function connectAll(urls: readonly string[]): Promise<Redis[]> {
  return Promise.all(urls.map((url) => connectIoredis(url)));
}

/** An ioredis 4 client (for redlock 4, which calls the v4 callback API). */
async function connectIoredis4(url: string): Promise<IORedis4.Redis> {
  const client = new IORedis4(url, { lazyConnect: true });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

function redlock4(tuned: boolean): OpenContender {
  return async ({ urls }): Promise<ContenderInstance> => {
    const clients = await Promise.all(urls.map((u) => connectIoredis4(u)));
    const redlock = new Redlock4(clients, tuned ? tunedRedlock : {});
    redlock.on('clientError', () => undefined);
    return {
      async acquire(key, { ttlMs }): Promise<HeldLock> {
        const lock = await redlock.lock(key, ttlMs);
        return { release: () => lock.unlock() };
      },
      close: () => quitAll(clients),
    };
  };
}

/** redlock 5 and @sesamecare-oss/redlock (its fork) share their API. */
function redlock5Api(
  Redlock: typeof Redlock5 | typeof SesameRedlock,
  tuned: boolean,
): OpenContender {
  return async ({ urls }): Promise<ContenderInstance> => {
    const clients = await connectAll(urls);
    const redlock = new Redlock(
      clients as unknown as ConstructorParameters<typeof Redlock5>[0] &
        ConstructorParameters<typeof SesameRedlock>[0],
      tuned ? tunedRedlock : {},
    );
    redlock.on('error', () => undefined);
    return {
      async acquire(key, { ttlMs }): Promise<HeldLock> {
        const lock = await redlock.acquire([key], ttlMs);
        return {
          release: async () => {
            await lock.release();
          },
        };
      },
      close: () => quitAll(clients),
    };
  };
}

/** redis-semaphore's own default retry interval is already 10 ms: one row each. */
const openSemaphoreMutex: OpenContender = async ({ urls }) => {
  const [client] = await connectAll(urls.slice(0, 1));
  return {
    async acquire(key, { ttlMs }): Promise<HeldLock> {
      const mutex = new Mutex(client, key, { lockTimeout: ttlMs });
      await mutex.acquire();
      return { release: () => mutex.release() };
    },
    close: () => quitAll([client]),
  };
};

const openSemaphoreRedlockMutex: OpenContender = async ({ urls }) => {
  const clients = await connectAll(urls);
  return {
    async acquire(key, { ttlMs }): Promise<HeldLock> {
      const mutex = new RedlockMutex(clients, key, { lockTimeout: ttlMs });
      await mutex.acquire();
      return { release: () => mutex.release() };
    },
    close: () => quitAll(clients),
  };
};

/** I: one permit of redis-semaphore's counting Semaphore (polls every 10 ms, no queue). */
const openSemaphoreSemaphore: OpenContender = async ({ urls }) => {
  const [client] = await connectAll(urls.slice(0, 1));
  return {
    async acquire(key, { ttlMs, signal, limit }): Promise<HeldLock> {
      if (limit === undefined)
        throw new Error('semaphore-semaphore needs a limit');
      const semaphore = new Semaphore(client, key, limit, {
        lockTimeout: ttlMs,
      });
      await semaphore.acquire(signal);
      return { release: () => semaphore.release() };
    },
    close: () => quitAll([client]),
  };
};

export const openers: ContenderModule['openers'] = {
  redlock4: redlock4(false),
  'redlock4-10ms': redlock4(true),
  redlock5: redlock5Api(Redlock5, false),
  'redlock5-10ms': redlock5Api(Redlock5, true),
  sesame: redlock5Api(SesameRedlock, false),
  'sesame-10ms': redlock5Api(SesameRedlock, true),
  'semaphore-mutex': openSemaphoreMutex,
  'semaphore-redlock-mutex': openSemaphoreRedlockMutex,
  'semaphore-semaphore': openSemaphoreSemaphore,
};
