import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { getFreePort } from '../../../../test/support/ports.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { AppInstance } from '../../loadtest/instances.js';
import { TEST_ADMIN_TOKEN } from './harness.js';

/**
 * App instances as OS processes (like the load test's) on the embedded
 * database, with a private redis-server and a temporary data directory,
 * every line they log kept with the time it arrived.
 */

export interface LoggedLine {
  readonly instance: number;
  readonly at: number;
  readonly text: string;
}

/** What an instance logs when it opens the data directory (at start or on takeover). */
export const HOSTS_LINE = /this instance hosts the embedded PGlite database/;
/** What an instance logs when it finds the host's port held but nothing answering (and leaves it alone). */
export const SILENT_HOST_LINE = /holds its port but does not answer/;
/** What an instance logs once it took over from a host that exited. */
export const TOOK_OVER_LINE = /Took over the embedded database/;

export interface EmbeddedCluster {
  readonly instances: readonly AppInstance[];
  readonly dataDir: string;
  readonly dbPort: number;
  readonly lines: LoggedLine[];
  /** Lines of `instance` (all when undefined) matching `pattern`. */
  linesMatching(pattern: RegExp, instance?: number): LoggedLine[];
  /** Resolves the first line matching `pattern` logged at or after `since`; rejects after `timeoutMs`. */
  waitForLine(
    pattern: RegExp,
    since: number,
    timeoutMs: number,
  ): Promise<LoggedLine>;
  /** `fetch` against instance `index`. */
  request(index: number, route: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

/**
 * Starts `count` instances: the first alone (it hosts the database), then the
 * others together (they connect to it).
 */
export async function startEmbeddedCluster(
  count: number,
): Promise<EmbeddedCluster> {
  const [redis, dataDir, dbPort, ...ports] = await Promise.all([
    startRedisServer(),
    mkdtemp(path.join(os.tmpdir(), 'flash-sale-takeover-')),
    ...Array.from({ length: count + 1 }, () => getFreePort()),
  ] as [Promise<RedisServerHandle>, Promise<string>, ...Promise<number>[]]);
  const lines: LoggedLine[] = [];
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    REDIS_URL: redis.url,
    LOCAL_REDIS: '0',
    EMBEDDED_DB_PORT: String(dbPort),
    EMBEDDED_DB_DIR: dataDir,
    NO_COLOR: '1',
  };
  delete env.DATABASE_URL;
  const instances = ports.map(
    (port, index) =>
      new AppInstance({
        index,
        port,
        env,
        fromBuild: false,
        startTimeoutMs: 30_000,
        onLine: (instance, text) =>
          lines.push({ instance, at: Date.now(), text }),
      }),
  );
  const linesMatching = (pattern: RegExp, instance?: number) =>
    lines.filter(
      (line) =>
        (instance === undefined || line.instance === instance) &&
        pattern.test(line.text),
    );
  const stop = async () => {
    await Promise.all(instances.map((instance) => instance.kill()));
    await redis.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await instances[0].start();
    await Promise.all(instances.slice(1).map((instance) => instance.start()));
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    instances,
    dataDir,
    dbPort,
    lines,
    linesMatching,
    async waitForLine(pattern, since, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = lines.find((l) => l.at >= since && pattern.test(l.text));
        if (line) return line;
        if (Date.now() > deadline) {
          throw new Error(
            `No line matching ${pattern} within ${timeoutMs} ms; the last ones:\n` +
              lines
                .slice(-30)
                .map((l) => `[${l.instance + 1}] ${l.text}`)
                .join('\n'),
          );
        }
        await sleep(50);
      }
    },
    request: (index, route, init) =>
      fetch(`http://127.0.0.1:${instances[index].port}${route}`, {
        ...init,
        signal: AbortSignal.timeout(5_000),
      }),
    stop,
  };
}

/** POST /api/coupon/seckill/:id as `userId`: the status. */
export async function purchase(
  cluster: EmbeddedCluster,
  index: number,
  couponId: number,
  userId: string,
): Promise<number> {
  const response = await cluster.request(
    index,
    `/api/coupon/seckill/${couponId}`,
    { method: 'POST', headers: { userId } },
  );
  await response.body?.cancel();
  return response.status;
}

/** Polls GET /health on `index` until it answers 200; the time that took, in ms. */
export async function untilHealthy(
  cluster: EmbeddedCluster,
  index: number,
  timeoutMs: number,
): Promise<number> {
  const startedAt = Date.now();
  for (;;) {
    const status = await cluster
      .request(index, '/health')
      .then(async (response) => {
        await response.body?.cancel();
        return response.status;
      })
      .catch(() => 0);
    if (status === 200) return Date.now() - startedAt;
    if (Date.now() - startedAt > timeoutMs) {
      throw new Error(
        `Instance ${index + 1} not healthy within ${timeoutMs} ms (last status ${status}):\n` +
          cluster.instances[index].logTail(),
      );
    }
    await sleep(100);
  }
}
