import {
  startRedisServer,
  type RedisServerHandle,
  type RedisServerOptions,
} from './redis-server.js';

/**
 * Independent throwaway Redis servers, e.g. the N masters of a Redlock quorum:
 * no replication between them, each a {@link startRedisServer} process on its
 * own free loopback port, without persistence, killed when the test process
 * dies.
 */

/** The servers started by {@link startRedisNodes}. */
export interface RedisNodes {
  /** The servers, in order (each can also be frozen, thawed, stopped). */
  readonly servers: readonly RedisServerHandle[];
  /** Their connection URLs, in order. */
  readonly urls: readonly string[];
  /** SIGKILLs server `index`, as a crash would, and waits until it exited. */
  kill(index: number): Promise<void>;
  /**
   * Starts server `index` again on the same port (stopping it first if it
   * runs), with an empty data set: there is no persistence.
   */
  restart(index: number): Promise<void>;
  /** Stops every server and waits until they exited. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `count` independent servers in parallel, all with `options`, and
 * resolves once each answers PING. If one fails to start, the others are
 * stopped again.
 */
export async function startRedisNodes(
  count: number,
  options: RedisServerOptions = {},
): Promise<RedisNodes> {
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(`count must be a positive integer, got ${count}`);
  }
  const started = await Promise.allSettled(
    Array.from({ length: count }, () => startRedisServer(options)),
  );
  const servers = started.flatMap((result) =>
    result.status === 'fulfilled' ? [result.value] : [],
  );
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    await Promise.all(servers.map((server) => server.stop()));
    throw failed.reason;
  }
  const at = (index: number) => {
    const server = servers[index];
    if (!server) throw new RangeError(`No server with index ${index}`);
    return server;
  };
  return {
    servers,
    urls: servers.map((server) => server.url),
    kill: async (index) => at(index).kill(),
    restart: async (index) => at(index).restart(),
    stop: async () => {
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}
