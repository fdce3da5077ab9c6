import { findExecutable } from './find-executable.js';
import { ManagedRedisServer, PortInUseError } from './managed-redis-server.js';
import { getFreePort } from './ports.js';
import { installExitHook } from './redis-server-process.js';
import { generateTlsMaterial } from './redis-server-tls.js';

/**
 * Throwaway `redis-server` processes for tests.
 *
 * Every call to {@link startRedisServer} spawns its own server on a free
 * loopback port with no persistence and a private temporary directory, so test
 * files can run in parallel and may stop, kill or restart "their" Redis without
 * touching anybody else's (in particular not a shared server on 6379).
 *
 * Servers are cleaned up even when a test forgets to stop them or the test
 * process dies: an `exit` handler SIGKILLs them, and a tiny `sh` watchdog per
 * server kills it when the Node process disappears without running `exit`
 * handlers (SIGTERM from the test runner, SIGKILL, a crash).
 */

/** How to configure a server started by {@link startRedisServer}. */
export interface RedisServerOptions {
  /**
   * Password of the `default` user (`--requirepass`). Without it the default
   * user needs no password.
   */
  password?: string;
  /**
   * An extra ACL user with full access (`--user <name> on ><password> ~* &* +@all`).
   * The `default` user is left as it is (open, unless {@link password} is set).
   */
  aclUser?: { name: string; password: string };
  /**
   * Serve TLS only: the plain port is disabled (`--port 0`) and the server
   * listens with a certificate for `127.0.0.1`/`localhost` signed by a fresh
   * throwaway CA (see {@link RedisServerHandle.tlsCa}). Clients need no
   * certificate of their own. Needs `openssl` on PATH.
   */
  tls?: boolean;
  /**
   * More `redis-server` arguments, appended last so they can override the
   * defaults, e.g. `['--enable-debug-command', 'local']` to allow `DEBUG SLEEP`.
   */
  extraArgs?: string[];
  /**
   * Contents of a config file, written afresh to the server's temporary
   * directory on every (re)start and passed as the first argument, before all
   * others. Sentinel needs one it can rewrite: `{ config: 'sentinel monitor
   * ...', extraArgs: ['--sentinel'] }`.
   */
  config?: string;
}

/** A running (or stopped) server started by {@link startRedisServer}. */
export interface RedisServerHandle {
  /** The loopback port the server listens on (the TLS port when `tls` is set). Never changes. */
  port: number;
  /** Always `127.0.0.1`. */
  host: '127.0.0.1';
  /**
   * Connection URL: `redis://` or, with `tls`, `rediss://`, carrying the ACL
   * user's credentials if `aclUser` is set, else the default user's password if
   * `password` is set (`redis://:<password>@...`). Credentials are URL-encoded.
   */
  url: string;
  /**
   * PEM certificate of the CA that signed the server certificate, when `tls` is
   * set: pass it as `tls: { ca }` to the client.
   */
  tlsCa?: Buffer;
  /**
   * Stops the server with SIGTERM (SIGKILL if it has not exited after 5s),
   * waits until the process has exited (the port is free again) and removes
   * its temporary directory. Does nothing if it is not running.
   */
  stop(): Promise<void>;
  /**
   * Kills the server with SIGKILL, as a crash would, and waits until the
   * process has exited. Does nothing if it is not running.
   */
  kill(): Promise<void>;
  /**
   * Stops the server if it is running, then starts it again on the same port
   * with the same configuration (and the same TLS CA). The data is gone: the
   * server has no persistence.
   */
  restart(): Promise<void>;
  /** The server's process id while it is running, else `undefined`. */
  pid(): number | undefined;
  /**
   * Freezes the server with SIGSTOP, as a hung host would: connections stay
   * open and commands are accepted by the kernel, but nothing answers until
   * {@link thaw}. Resolves once the process is stopped. {@link stop},
   * {@link kill} and {@link restart} work on a frozen server too. Does
   * nothing if it is not running or already frozen.
   */
  freeze(): Promise<void>;
  /**
   * Lets a frozen server run again (SIGCONT): it then answers what queued up
   * meanwhile. Does nothing if it is not running or not frozen.
   */
  thaw(): Promise<void>;
}

const PORT_ATTEMPTS = 5;

/**
 * The absolute path of the `redis-server` binary used by the tests: the
 * `REDIS_SERVER_BIN` environment variable (a path or a command name) if set,
 * else `redis-server` looked up on PATH.
 *
 * @throws Error explaining how to install Redis when it cannot be found.
 */
export function redisServerBinary(): string {
  const override = process.env.REDIS_SERVER_BIN;
  if (override) {
    const found = findExecutable(override);
    if (found === undefined) {
      throw new Error(
        `REDIS_SERVER_BIN is set to "${override}", which is not an executable file. ` +
          'Point it at a redis-server binary, or unset it and install Redis ' +
          '(Debian/Ubuntu: `apt-get update && apt-get install -y redis-server`).',
      );
    }
    return found;
  }
  const found = findExecutable('redis-server');
  if (found === undefined) {
    throw new Error(
      'redis-server was not found on PATH. The tests start their own throwaway ' +
        'Redis servers and need the binary (Redis 7): install it with ' +
        '`apt-get update && apt-get install -y redis-server` on Debian/Ubuntu ' +
        '(or `brew install redis` on macOS), or set REDIS_SERVER_BIN to its path.',
    );
  }
  return found;
}

/**
 * Starts a new `redis-server` on a free port of 127.0.0.1 and resolves once it
 * answers PING. Stop it with {@link RedisServerHandle.stop} (e.g. in
 * `afterAll`); servers still running when the process exits are killed.
 */
export async function startRedisServer(
  options: RedisServerOptions = {},
): Promise<RedisServerHandle> {
  validateOptions(options);
  const binary = redisServerBinary();
  const tlsMaterial = options.tls ? await generateTlsMaterial() : undefined;
  installExitHook();

  // getFreePort() closes its probe socket before redis binds the port, so a
  // parallel test could grab it in between: retry with another port then.
  let lastError: unknown;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const server = new ManagedRedisServer(
      await getFreePort(),
      binary,
      options,
      tlsMaterial,
    );
    try {
      await server.restart();
      return server;
    } catch (error) {
      if (!(error instanceof PortInUseError)) throw error;
      lastError = error;
    }
  }
  throw lastError;
}

function validateOptions(options: RedisServerOptions): void {
  if (options.password !== undefined && options.password === '') {
    throw new Error('RedisServerOptions.password must not be empty');
  }
  if (options.aclUser) {
    const { name, password } = options.aclUser;
    if (!name || /[\s\0]/.test(name)) {
      throw new Error(
        `RedisServerOptions.aclUser.name must be non-empty without spaces, got ${JSON.stringify(name)}`,
      );
    }
    if (!password) {
      throw new Error('RedisServerOptions.aclUser.password must not be empty');
    }
  }
}
