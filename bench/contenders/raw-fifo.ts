import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { connectIoredis, quitAll } from './clients.js';
import type { ContenderModule, HeldLock, OpenContender } from './types.js';

/** Takes the free lock (1), or queues the token behind it (0). */
const acquireOrQueue = `if redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  return 1
end
redis.call('rpush', KEYS[2], ARGV[1])
return 0`;

/**
 * The holder's release: the lock goes straight to the head of the queue (the
 * key takes its token) and the hand-off is announced on the channel; with
 * nobody queued the key is deleted.
 */
const releaseOrHandOff = `if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
local successor = redis.call('lpop', KEYS[2])
if successor then
  redis.call('set', KEYS[1], successor, 'PX', ARGV[2])
  redis.call('publish', ARGV[3], successor)
  return 2
end
redis.call('del', KEYS[1])
return 1`;

/** A waiter that gives up leaves the queue; 1 when the lock was handed to it meanwhile. */
const leaveQueue = `redis.call('lrem', KEYS[2], 0, ARGV[1])
if redis.call('get', KEYS[1]) == ARGV[1] then
  return 1
end
return 0`;

type FifoClient = Redis & {
  fifoAcquire(
    key: string,
    queue: string,
    token: string,
    ttlMs: number,
  ): Promise<number>;
  fifoRelease(
    key: string,
    queue: string,
    token: string,
    ttlMs: number,
    channel: string,
  ): Promise<number>;
  fifoLeave(key: string, queue: string, token: string): Promise<number>;
};

/** Scripts sent with EVALSHA (EVAL after a NOSCRIPT), as ioredis's defineCommand does. */
function withFifoScripts(client: Redis): FifoClient {
  client.defineCommand('fifoAcquire', { numberOfKeys: 2, lua: acquireOrQueue });
  client.defineCommand('fifoRelease', {
    numberOfKeys: 2,
    lua: releaseOrHandOff,
  });
  client.defineCommand('fifoLeave', { numberOfKeys: 2, lua: leaveQueue });
  return client as FifoClient;
}

/** Resolves true when `handedOver` does, false when `signal` aborts first. */
function handedOverOrAborted(
  handedOver: Promise<void>,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  if (!signal) return handedOver.then(() => true);
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => resolve(false);
    signal.addEventListener('abort', onAbort, { once: true });
    void handedOver.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    });
  });
}

/**
 * The FIFO lock with direct hand-off a competent engineer would write on raw
 * ioredis: one script takes the free lock or queues the token (`<key>:q`);
 * the release script passes the lock to the head of the queue and PUBLISHes
 * its token on `<key>:w`. Each instance (one per process) has one subscriber
 * connection, subscribed to a key's channel before its first acquisition
 * there, and resolves the waiter whose token is announced.
 */
const openRawFifo: OpenContender = async ({ urls }) => {
  const [connected, subscriber] = await Promise.all([
    connectIoredis(urls[0]),
    connectIoredis(urls[0]),
  ]);
  const client = withFifoScripts(connected);
  /** This process's waiters by token: calling one hands it the lock. */
  const handOffs = new Map<string, () => void>();
  const subscriptions = new Map<string, Promise<unknown>>();
  subscriber.on('message', (_channel: string, token: string) => {
    handOffs.get(token)?.();
  });
  const subscribe = (channel: string): Promise<unknown> => {
    let subscribed = subscriptions.get(channel);
    if (!subscribed) {
      subscribed = subscriber.subscribe(channel);
      subscriptions.set(channel, subscribed);
    }
    return subscribed;
  };
  return {
    async acquire(key, { ttlMs, signal }): Promise<HeldLock> {
      const queue = `${key}:q`;
      const channel = `${key}:w`;
      await subscribe(channel);
      if (signal?.aborted) throw new Error('aborted', { cause: signal.reason });
      const token = randomBytes(16).toString('hex');
      const held: HeldLock = {
        release: async () => {
          await client.fifoRelease(key, queue, token, ttlMs, channel);
        },
      };
      // Registered before queueing: the announcement may arrive before the
      // script's reply (they come on different connections).
      const handedOver = new Promise<void>((resolve) =>
        handOffs.set(token, resolve),
      );
      try {
        if ((await client.fifoAcquire(key, queue, token, ttlMs)) === 1)
          return held;
        if (await handedOverOrAborted(handedOver, signal)) return held;
        if ((await client.fifoLeave(key, queue, token)) === 1)
          await held.release();
        throw new Error('aborted', { cause: signal?.reason });
      } finally {
        handOffs.delete(token);
      }
    },
    close: () => quitAll([client, subscriber]),
  };
};

export const openers: ContenderModule['openers'] = { 'raw-fifo': openRawFifo };
