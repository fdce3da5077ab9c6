import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { sleep } from '../clock.js';
import { connectIoredis, quitAll } from './clients.js';
import type { ContenderInstance, ContenderModule, HeldLock } from './types.js';

/** Compare-and-delete: only the owner's token frees the key. */
const compareAndDelete = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`;

type WithCad<C extends Redis | Cluster = Redis> = C & {
  benchCompareAndDelete(key: string, token: string): Promise<number>;
};

/** Adds the release script (sent with EVALSHA, EVAL after a NOSCRIPT) to a client. */
export function withCompareAndDelete<C extends Redis | Cluster>(
  client: C,
): WithCad<C> {
  if (
    typeof (client as unknown as Partial<WithCad<C>>).benchCompareAndDelete !==
    'function'
  ) {
    client.defineCommand('benchCompareAndDelete', {
      numberOfKeys: 1,
      lua: compareAndDelete,
    });
  }
  return client as WithCad<C>;
}

function aborted(signal: AbortSignal | undefined): Error {
  return new Error('aborted', { cause: signal?.reason });
}

/**
 * The raw lock on `client` (one server, or a Cluster, which routes each key to
 * its master): `SET key token PX ttl NX`, released by an EVALSHA
 * compare-and-delete, polling every 1 ms while the key is busy. Closing it
 * quits the client.
 */
export function rawLockOn(connected: Redis | Cluster): ContenderInstance {
  const client = withCompareAndDelete(connected);
  return {
    async acquire(key, { ttlMs, signal }): Promise<HeldLock> {
      const token = randomBytes(16).toString('hex');
      for (;;) {
        const ok = await client.set(key, token, 'PX', ttlMs, 'NX');
        if (ok === 'OK') {
          return {
            release: async () => {
              await client.benchCompareAndDelete(key, token);
            },
          };
        }
        if (signal?.aborted) throw aborted(signal);
        await sleep(1);
      }
    },
    close: () => quitAll([client]),
  };
}

/**
 * The raw quorum baseline over `urls`: the same SET NX PX on every node at
 * once, held when a majority said OK within the lease (minus a drift of 1% +
 * 2 ms); otherwise the partial grants are released and it tries again after
 * 1 ms.
 */
export async function rawQuorumOn(
  urls: readonly string[],
): Promise<ContenderInstance> {
  const clients = await Promise.all(
    urls.map(async (url) => withCompareAndDelete(await connectIoredis(url))),
  );
  const quorum = Math.floor(clients.length / 2) + 1;
  const releaseAll = (key: string, token: string) =>
    Promise.all(
      clients.map((c) => c.benchCompareAndDelete(key, token).catch(() => 0)),
    );
  return {
    async acquire(key, { ttlMs, signal }): Promise<HeldLock> {
      const token = randomBytes(16).toString('hex');
      for (;;) {
        const startedAt = Date.now();
        const replies = await Promise.all(
          clients.map((c) =>
            c.set(key, token, 'PX', ttlMs, 'NX').catch(() => null),
          ),
        );
        const votes = replies.filter((r) => r === 'OK').length;
        const drift = Math.round(ttlMs * 0.01) + 2;
        if (votes >= quorum && startedAt + ttlMs - drift > Date.now()) {
          return {
            release: async () => {
              await releaseAll(key, token);
            },
          };
        }
        if (votes > 0) await releaseAll(key, token);
        if (signal?.aborted) throw aborted(signal);
        await sleep(1);
      }
    },
    close: () => quitAll(clients),
  };
}

/** `raw`: {@link rawLockOn} one server; `raw-quorum`: {@link rawQuorumOn} every URL. */
export const openers: ContenderModule['openers'] = {
  raw: async ({ urls }) => rawLockOn(await connectIoredis(urls[0])),
  'raw-quorum': ({ urls }) => rawQuorumOn(urls),
};
