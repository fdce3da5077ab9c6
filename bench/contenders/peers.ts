import type { Redis } from 'ioredis';
import Redlock4 from 'redlock4';
import Redlock5 from 'redlock5';
import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock';
import { Mutex, RedlockMutex } from 'redis-semaphore';
import { connectIoredis, connectIoredis4, quitAll } from './clients.js';
import { installedVersion } from './versions.js';
import type { Contender, ContenderInstance, HeldLock } from './types.js';

/**
 * "Tuned" peers: retry delay 10 ms (jitter 5 ms, half the delay like the
 * defaults' 100/200), and 200 retries so the wait budget stays about the
 * defaults' 2 s (10 retries x 200 ms).
 */
const tunedRedlock = { retryDelay: 10, retryJitter: 5, retryCount: 200 };

const v = {
  ioredis: installedVersion('ioredis'),
  ioredis4: installedVersion('ioredis4'),
  redlock4: installedVersion('redlock4'),
  redlock5: installedVersion('redlock5'),
  sesame: installedVersion('@sesamecare-oss/redlock'),
  semaphore: installedVersion('redis-semaphore'),
};

async function connectAll(urls: readonly string[]): Promise<Redis[]> {
  return Promise.all(urls.map((url) => connectIoredis(url)));
}

function redlock4(tuned: boolean): Contender {
  return {
    id: tuned ? 'redlock4-10ms' : 'redlock4',
    library: 'redlock@4',
    label: `redlock ${v.redlock4}${tuned ? ', 10 ms retry' : ''}`,
    detail: `redlock ${v.redlock4} on ioredis ${v.ioredis4} (it calls the v4 callback API); ${tuned ? 'retryDelay 10, retryJitter 5, retryCount 200' : 'defaults: retryDelay 200, retryJitter 100, retryCount 10'}`,
    kind: 'peer',
    async create({ urls }): Promise<ContenderInstance> {
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
    },
  };
}

function redlock5(tuned: boolean): Contender {
  return {
    id: tuned ? 'redlock5-10ms' : 'redlock5',
    library: 'redlock@5',
    label: `redlock ${v.redlock5}${tuned ? ', 10 ms retry' : ''}`,
    detail: `redlock ${v.redlock5} on ioredis ${v.ioredis}; ${tuned ? 'retryDelay 10, retryJitter 5, retryCount 200' : 'defaults: retryDelay 200, retryJitter 100, retryCount 10'}`,
    kind: 'peer',
    async create({ urls }): Promise<ContenderInstance> {
      const clients = await connectAll(urls);
      const redlock = new Redlock5(
        clients as unknown as ConstructorParameters<typeof Redlock5>[0],
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
    },
  };
}

function sesame(tuned: boolean): Contender {
  return {
    id: tuned ? 'sesame-10ms' : 'sesame',
    library: '@sesamecare-oss/redlock',
    label: `@sesamecare-oss/redlock ${v.sesame}${tuned ? ', 10 ms retry' : ''}`,
    detail: `@sesamecare-oss/redlock ${v.sesame} on ioredis ${v.ioredis}; ${tuned ? 'retryDelay 10, retryJitter 5, retryCount 200' : 'defaults: retryDelay 200, retryJitter 100, retryCount 10'}`,
    kind: 'peer',
    async create({ urls }): Promise<ContenderInstance> {
      const clients = await connectAll(urls);
      const redlock = new SesameRedlock(
        clients as unknown as ConstructorParameters<typeof SesameRedlock>[0],
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
    },
  };
}

/** redis-semaphore's own default retry interval is already 10 ms: one row each. */
export const semaphoreMutex: Contender = {
  id: 'semaphore-mutex',
  library: 'redis-semaphore',
  label: `redis-semaphore ${v.semaphore} Mutex`,
  detail: `redis-semaphore ${v.semaphore} Mutex on ioredis ${v.ioredis}; defaults (retryInterval 10 ms, acquireTimeout 10 s, refresh every 0.8 x lockTimeout)`,
  kind: 'peer',
  async create({ urls }): Promise<ContenderInstance> {
    const [client] = await connectAll(urls.slice(0, 1));
    return {
      async acquire(key, { ttlMs }): Promise<HeldLock> {
        const mutex = new Mutex(client, key, { lockTimeout: ttlMs });
        await mutex.acquire();
        return { release: () => mutex.release() };
      },
      close: () => quitAll([client]),
    };
  },
};

export const semaphoreRedlockMutex: Contender = {
  id: 'semaphore-redlock-mutex',
  library: 'redis-semaphore',
  label: `redis-semaphore ${v.semaphore} RedlockMutex`,
  detail: `redis-semaphore ${v.semaphore} RedlockMutex on ioredis ${v.ioredis}; defaults (retryInterval 10 ms, acquireTimeout 10 s)`,
  kind: 'peer',
  async create({ urls }): Promise<ContenderInstance> {
    const clients = await connectAll(urls);
    return {
      async acquire(key, { ttlMs }): Promise<HeldLock> {
        const mutex = new RedlockMutex(clients, key, { lockTimeout: ttlMs });
        await mutex.acquire();
        return { release: () => mutex.release() };
      },
      close: () => quitAll(clients),
    };
  },
};

export const redlock4Default = redlock4(false);
export const redlock4Tuned = redlock4(true);
export const redlock5Default = redlock5(false);
export const redlock5Tuned = redlock5(true);
export const sesameDefault = sesame(false);
export const sesameTuned = sesame(true);
