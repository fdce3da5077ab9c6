import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { sleep } from '../clock.js';
import { connectIoredis, quitAll } from './clients.js';
import type { ContenderModule, HeldLock, OpenContender } from './types.js';

/**
 * Takes a permit (1) or finds none free (0). The holders are a sorted set of
 * tokens scored by their expiry on the server's clock: expired ones are
 * dropped first, so a dead holder's permit comes back after its lease.
 */
const takePermit = `local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[3])
  return 1
end
return 0`;

type SemaphoreClient = Redis & {
  benchTakePermit(
    key: string,
    token: string,
    limit: number,
    ttlMs: number,
  ): Promise<number>;
};

/**
 * The counting semaphore one would write on raw ioredis: one script (EVALSHA)
 * takes a permit when fewer than `limit` unexpired tokens hold one, polling
 * every 1 ms while none is free (as the raw lock does); `ZREM` gives it back.
 * No queue: whoever polls at the right moment gets the freed permit.
 */
const openRawSemaphore: OpenContender = async ({ urls }) => {
  const connected = await connectIoredis(urls[0]);
  connected.defineCommand('benchTakePermit', {
    numberOfKeys: 1,
    lua: takePermit,
  });
  const client = connected as SemaphoreClient;
  return {
    async acquire(key, { ttlMs, signal, limit }): Promise<HeldLock> {
      if (limit === undefined) throw new Error('raw-semaphore needs a limit');
      const token = randomBytes(16).toString('hex');
      for (;;) {
        if ((await client.benchTakePermit(key, token, limit, ttlMs)) === 1) {
          return {
            release: async () => {
              await client.zrem(key, token);
            },
          };
        }
        if (signal?.aborted)
          throw new Error('aborted', { cause: signal.reason });
        await sleep(1);
      }
    },
    close: () => quitAll([client]),
  };
};

export const openers: ContenderModule['openers'] = {
  'raw-semaphore': openRawSemaphore,
};
