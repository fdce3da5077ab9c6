import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { sleep } from '../clock.js';
import { connectIoredis, quitAll } from './clients.js';
import type { ContenderModule, HeldLock, OpenContender } from './types.js';

/**
 * How long a polling writer's `writer-waiting` mark lasts, ms: a writer
 * renews it on every poll (1 ms apart, more on a busy event loop), so
 * readers stay out while one waits, and a writer that stops polling holds
 * them back no longer than this.
 */
const writerWaitingMs = 50;

/** The server's clock in ms, for the readers' expiry scores. */
const serverNow = `local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * Takes a read hold (1) or not (0). KEYS: readers (a sorted set of tokens
 * scored by expiry on the server's clock), writer, writer-waiting. A reader
 * gets in when no writer holds the lock and none is waiting.
 */
const takeRead = `${serverNow}
if redis.call('exists', KEYS[2]) == 1 or redis.call('exists', KEYS[3]) == 1 then
  return 0
end
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[2])
return 1`;

/**
 * Takes the write hold (1) or marks a writer waiting (0). KEYS as takeRead.
 * A writer gets in when no writer holds the lock and no unexpired reader
 * does (`SET PX`); its mark goes then (another waiting writer sets it again
 * on its next poll).
 */
const takeWrite = `${serverNow}
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('exists', KEYS[2]) == 1 or redis.call('zcard', KEYS[1]) > 0 then
  redis.call('set', KEYS[3], '1', 'PX', ARGV[3])
  return 0
end
redis.call('set', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('del', KEYS[3])
return 1`;

/** Deletes the writer key if it still holds `token` (compare-and-delete). */
const releaseWrite = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`;

type ReadWriteClient = Redis & {
  benchTakeRead(
    readers: string,
    writer: string,
    waiting: string,
    token: string,
    ttlMs: number,
  ): Promise<number>;
  benchTakeWrite(
    readers: string,
    writer: string,
    waiting: string,
    token: string,
    ttlMs: number,
    waitingMs: number,
  ): Promise<number>;
  benchReleaseWrite(writer: string, token: string): Promise<number>;
};

/**
 * The read-write lock one would write on raw ioredis: one script (EVALSHA)
 * per verb, polling every 1 ms while the lock is busy. Readers are a sorted
 * set of tokens (`ZREM` releases one), the writer a `SET PX` key
 * (compare-and-delete releases it); a polling writer sets a short-lived
 * `writer-waiting` key that keeps new readers out, so it prefers writers as
 * ours does (without a queue: whoever polls at the right moment gets in).
 * Every key has a lease (PX), so nothing is left behind.
 */
const openRawReadWriteLock: OpenContender = async ({ urls }) => {
  const connected = await connectIoredis(urls[0]);
  connected.defineCommand('benchTakeRead', { numberOfKeys: 3, lua: takeRead });
  connected.defineCommand('benchTakeWrite', {
    numberOfKeys: 3,
    lua: takeWrite,
  });
  connected.defineCommand('benchReleaseWrite', {
    numberOfKeys: 1,
    lua: releaseWrite,
  });
  const client = connected as ReadWriteClient;
  return {
    async acquire(key, { ttlMs, signal, mode }): Promise<HeldLock> {
      if (mode === undefined) throw new Error('raw-rwlock needs a mode');
      const readers = `${key}:readers`;
      const writer = `${key}:writer`;
      const waiting = `${key}:writer-waiting`;
      const token = randomBytes(16).toString('hex');
      for (;;) {
        if (mode === 'read') {
          if (
            (await client.benchTakeRead(
              readers,
              writer,
              waiting,
              token,
              ttlMs,
            )) === 1
          ) {
            return {
              release: async () => {
                await client.zrem(readers, token);
              },
            };
          }
        } else if (
          (await client.benchTakeWrite(
            readers,
            writer,
            waiting,
            token,
            ttlMs,
            writerWaitingMs,
          )) === 1
        ) {
          return {
            release: async () => {
              await client.benchReleaseWrite(writer, token);
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
  'raw-rwlock': openRawReadWriteLock,
};
