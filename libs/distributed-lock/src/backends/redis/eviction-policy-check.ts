import type { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { answerWithin } from '../answer-deadline.js';

/** Where {@link warnIfLocksCanBeEvicted} reports; a Nest `Logger` fits. */
export type EvictionCheckLogger = Pick<Logger, 'warn' | 'debug'>;

/** Options of {@link warnIfLocksCanBeEvicted}. */
export interface EvictionCheckOptions {
  /**
   * Longest time, in ms, to wait for Redis's answer once the client is ready;
   * the check is then given up with a debug line. Default 2000 ms.
   */
  readonly timeoutMs?: number;
  /** Gives the check up without logging anything more (e.g. on shutdown). */
  readonly signal?: AbortSignal;
}

/** How long a startup check waits for Redis by default, in ms. */
export const defaultTimeoutMs = 2000;

/** Clients checked, or being checked, so each is checked once. */
const checkedClients = new WeakSet<Redis | Cluster>();

/**
 * Warns once per client when the Redis server's (or any Cluster master's) `maxmemory-policy` lets it
 * evict lock keys, which would let another process acquire a lock whose
 * holder still runs. `noeviction` is the only policy that never does.
 *
 * Reads the policy with `CONFIG GET maxmemory-policy`, or from `INFO memory`
 * when the server refuses `CONFIG` (as managed services often do). Runs when
 * the client is first ready, so it neither connects a `lazyConnect` client nor
 * needs Redis to be up at startup, and never again on reconnects. Never
 * rejects: if the policy cannot be read in time, it logs a debug line and
 * gives up. Keeps no timer that would hold the process alive.
 *
 * @returns a promise settled once the check has been made or given up, for
 *   tests: callers need not wait for it.
 */
export function warnIfLocksCanBeEvicted(
  client: Redis | Cluster,
  logger: EvictionCheckLogger,
  options: EvictionCheckOptions = {},
): Promise<void> {
  const { signal, timeoutMs = defaultTimeoutMs } = options;
  if (checkedClients.has(client) || signal?.aborted) return Promise.resolve();
  checkedClients.add(client);
  return new Promise<void>((resolve) => {
    const run = (): void => {
      signal?.removeEventListener('abort', giveUp);
      void check(client, logger, timeoutMs, signal).then(resolve);
    };
    const giveUp = (): void => {
      client.removeListener('ready', run);
      // Not checked after all: another module on this client may still check it.
      checkedClients.delete(client);
      resolve();
    };
    if (client.status === 'ready') {
      run();
    } else {
      client.once('ready', run);
      signal?.addEventListener('abort', giveUp, { once: true });
    }
  });
}

async function check(
  client: Redis | Cluster,
  logger: EvictionCheckLogger,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  let policy: string;
  try {
    policy = await answerWithin(readClusterPolicy(client), timeoutMs, {
      unref: true,
    });
  } catch (error) {
    if (!signal?.aborted) {
      logger.debug(
        `Could not read Redis maxmemory-policy, skipping the eviction check: ${describe(error)}`,
      );
    }
    return;
  }
  if (signal?.aborted || !evictsLockKeys(policy)) return;
  const ttlNote = policy.startsWith('volatile-')
    ? ' (it evicts keys that have a TTL, and every lock key has one)'
    : '';
  logger.warn(
    `Redis maxmemory-policy is ${policy}${ttlNote}: ` +
      'under memory pressure Redis may evict the key of a held lock, and another ' +
      'process could then acquire that lock while its holder is still running. ' +
      'Set maxmemory-policy noeviction on this Redis, or keep locks on a separate Redis that uses it.',
  );
}

/**
 * Every policy but `noeviction` can evict lock keys: `allkeys-*` any key, and
 * `volatile-*` keys with a TTL, which every lock key (and its fencing counter,
 * queue and wake list) has. Under `volatile-*` they are even likelier victims
 * than under `allkeys-*` when the other data has no TTL, and `volatile-ttl`
 * picks short leases first. An unknown future policy is assumed to evict too.
 */
function evictsLockKeys(policy: string): boolean {
  return policy !== 'noeviction';
}

/** The policy of a server; of a Cluster, the first master's that evicts, if any does. */
async function readClusterPolicy(client: Redis | Cluster): Promise<string> {
  if (!client.isCluster) return readPolicy(client as Redis);
  const policies = await Promise.all(
    (client as Cluster).nodes('master').map(readPolicy),
  );
  return policies.find(evictsLockKeys) ?? 'noeviction';
}

async function readPolicy(client: Redis): Promise<string> {
  let configError: unknown;
  try {
    const policy = parseConfigReply(
      await client.config('GET', 'maxmemory-policy'),
    );
    if (policy !== undefined) return policy;
  } catch (error) {
    configError = error;
  }
  const info = await client.info('memory').catch((error: unknown) => {
    throw new Error(
      `CONFIG GET: ${describe(configError ?? 'no maxmemory-policy in reply')}; INFO memory: ${describe(error)}`,
    );
  });
  const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
  if (policy === undefined) {
    throw new Error('neither CONFIG GET nor INFO memory reports it');
  }
  return policy;
}

/** The policy from a RESP2 (`[name, value]`) or RESP3 (`{ name: value }`) reply. */
function parseConfigReply(reply: unknown): string | undefined {
  const value = Array.isArray(reply)
    ? reply[1]
    : (reply as Record<string, unknown> | null)?.['maxmemory-policy'];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** An error's message, or the thrown value as text. */
export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
