/**
 * The common set-up of a spec that tests locks against its own Redis: a
 * `redis-server` (per file, or per test for specs that restart or freeze
 * it), a client for looking at keys, optionally a TCP proxy in front of the
 * server per test, and lock services closed after each test.
 */
import { Redis } from 'ioredis';
import {
  openLocks,
  type OpenedLocks,
  type OpenLocksOptions,
} from './lock-clients.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

export interface RedisFixtureOptions {
  /** A new server for every test, for specs that freeze, kill or restart it. Default false. */
  readonly serverPerTest?: boolean;
  /** A TCP proxy in front of the server for every test. Default false. */
  readonly proxy?: boolean;
}

export interface RedisFixture {
  readonly server: RedisServerHandle;
  /** A plain client of the server, for looking at keys. */
  readonly redis: Redis;
  /** The proxy of the current test (with `proxy: true`). */
  readonly proxy: TcpProxy;
  /** A lock service on `url` (default: the server), closed after the test. */
  open(options?: OpenLocksOptions & { url?: string }): OpenedLocks;
}

/** `value`, set up by a hook; a clear error when read outside a test. */
function need<T>(value: T | undefined, what: string): T {
  if (value === undefined)
    throw new Error(`${what} is set up in a hook: use it inside a test`);
  return value;
}

/** Registers the hooks of the set-up in the calling spec file and returns its parts. */
export function useRedisFixture(
  options: RedisFixtureOptions = {},
): RedisFixture {
  let server: RedisServerHandle | undefined;
  let redis: Redis | undefined;
  let proxy: TcpProxy | undefined;
  const opened: OpenedLocks[] = [];

  const startServer = async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
    redis.on('error', () => undefined);
  };
  const stopServer = async () => {
    redis?.disconnect();
    await server?.stop();
  };

  if (options.serverPerTest) {
    beforeEach(startServer);
  } else {
    beforeAll(startServer);
    afterAll(stopServer);
  }
  if (options.proxy) {
    beforeEach(async () => {
      proxy = await startTcpProxy({ targetPort: server!.port });
    });
  }
  afterEach(async () => {
    proxy?.thaw();
    await server?.thaw();
    await Promise.all(opened.splice(0).map((s) => s.close()));
    await proxy?.close();
    if (options.serverPerTest) await stopServer();
    else await redis?.flushall();
  });

  return {
    get server() {
      return need(server, 'server');
    },
    get redis() {
      return need(redis, 'redis');
    },
    get proxy() {
      return need(proxy, 'proxy');
    },
    open(openOptions = {}) {
      const s = openLocks(
        openOptions.url ?? need(server, 'server').url,
        openOptions,
      );
      opened.push(s);
      return s;
    },
  };
}
