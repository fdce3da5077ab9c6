import type { Cluster, Redis } from 'ioredis';
import { answerWithin } from '../answer-deadline.js';
import {
  defaultTimeoutMs,
  describe,
  type EvictionCheckLogger,
  type EvictionCheckOptions,
} from './eviction-policy-check.js';

/** The oldest Redis the lock scripts run on: next-fence's `SET … GET`. */
export const oldestSupportedRedis = '6.2.0';

/** "6.2.14" as [6, 2, 14]; a part that is not a number counts as 0. */
function versionParts(version: string): number[] {
  return version.split('.').map((part) => Number.parseInt(part, 10) || 0);
}

/** Whether `version` ("major.minor.patch", as `INFO server` gives it) is older than `minimum`. */
export function isRedisOlderThan(version: string, minimum: string): boolean {
  const [have, need] = [versionParts(version), versionParts(minimum)];
  for (let i = 0; i < Math.max(have.length, need.length); i++) {
    const difference = (have[i] ?? 0) - (need[i] ?? 0);
    if (difference !== 0) return difference < 0;
  }
  return false;
}

/**
 * Warns when the Redis server (or any Cluster master) is older than
 * {@link oldestSupportedRedis}: every script that issues a fencing token,
 * which includes every acquisition that finds its key busy, would fail with
 * a syntax error there. Runs only on a client that is ready (so it never
 * connects a `lazyConnect` client), reads `INFO server` within `timeoutMs` (default 2000 ms),
 * and never rejects: a server that does not answer in time is let be, with a
 * debug line.
 */
export async function warnIfRedisTooOld(
  client: Redis | Cluster,
  logger: EvictionCheckLogger,
  options: EvictionCheckOptions & {
    /** The oldest version not warned about; {@link oldestSupportedRedis} unless a test says otherwise. */
    readonly minimum?: string;
  } = {},
): Promise<void> {
  const {
    signal,
    timeoutMs = defaultTimeoutMs,
    minimum = oldestSupportedRedis,
  } = options;
  if (client.status !== 'ready' || signal?.aborted) return;
  let versions: string[];
  try {
    versions = await answerWithin(readVersions(client), timeoutMs, {
      unref: true,
    });
  } catch (error) {
    if (!signal?.aborted)
      logger.debug(
        `Could not read the Redis version, skipping its check: ${describe(error)}`,
      );
    return;
  }
  const old = versions.find((version) => isRedisOlderThan(version, minimum));
  if (old === undefined || signal?.aborted) return;
  logger.warn(
    `Redis ${old} is older than ${minimum}, which the lock scripts need ` +
      '(SET ... GET): acquisitions that find a lock busy, and fencing tokens, will fail. ' +
      `Upgrade Redis to ${minimum} or later.`,
  );
}

/** The version of a server; of a Cluster, of every master. */
async function readVersions(client: Redis | Cluster): Promise<string[]> {
  const servers = client.isCluster
    ? (client as Cluster).nodes('master')
    : [client as Redis];
  const infos = await Promise.all(
    servers.map((server) => server.info('server')),
  );
  return infos.map((info) => {
    const version = /^redis_version:(\S+)/m.exec(info)?.[1];
    if (version === undefined)
      throw new Error('INFO server has no redis_version');
    return version;
  });
}
