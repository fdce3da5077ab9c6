import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  constants as fsConstants,
  rmSync,
  statSync,
} from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { promisify } from 'node:util';

import { getFreePort } from './ports.js';
import { setProcessStopped } from './process-state.js';

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

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;
const PORT_ATTEMPTS = 5;
const OUTPUT_TAIL_CHARS = 8_000;
const FALLBACK_BIN_DIRS = ['/usr/local/bin', '/usr/bin', '/usr/sbin', '/bin'];

const execFileAsync = promisify(execFile);

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

/** Raised internally when the chosen port was taken before redis bound it. */
class PortInUseError extends Error {}

interface TlsMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

interface RunningProcess {
  child: ChildProcess;
  watchdog?: ChildProcess;
  dir: string;
  exit: Promise<ExitInfo>;
  exited?: ExitInfo;
  /** Stopped by {@link ManagedRedisServer.freeze} and not continued since. */
  frozen?: boolean;
  output: string;
}

class ManagedRedisServer implements RedisServerHandle {
  readonly host = HOST;
  readonly url: string;
  readonly tlsCa?: Buffer;

  private current?: RunningProcess;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly port: number,
    private readonly binary: string,
    private readonly options: RedisServerOptions,
    private readonly tlsMaterial: TlsMaterial | undefined,
  ) {
    this.tlsCa = tlsMaterial?.ca;
    this.url = buildUrl(port, options);
  }

  stop(): Promise<void> {
    return this.serialize(() => this.terminate('SIGTERM'));
  }

  kill(): Promise<void> {
    return this.serialize(() => this.terminate('SIGKILL'));
  }

  restart(): Promise<void> {
    return this.serialize(async () => {
      await this.terminate('SIGTERM');
      await this.launch();
    });
  }

  pid(): number | undefined {
    const proc = this.current;
    return proc && !proc.exited ? proc.child.pid : undefined;
  }

  freeze(): Promise<void> {
    return this.serialize(async () => this.setFrozen(true));
  }

  thaw(): Promise<void> {
    return this.serialize(async () => this.setFrozen(false));
  }

  private setFrozen(frozen: boolean): void {
    const proc = this.current;
    const pid = this.pid();
    if (!proc || pid === undefined || Boolean(proc.frozen) === frozen) return;
    setProcessStopped(pid, frozen);
    proc.frozen = frozen;
  }

  /** Runs lifecycle operations one after another, even if callers overlap. */
  private serialize(operation: () => Promise<void>): Promise<void> {
    const result = this.queue.then(operation, operation);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async launch(): Promise<void> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'redis-test-'));
    let proc: RunningProcess | undefined;
    try {
      const args = await this.prepareArgs(dir);
      proc = spawnServer(this.binary, args, dir);
      await this.waitUntilReady(proc);
      this.current = proc;
    } catch (error) {
      if (proc) await terminateProcess(proc, 'SIGKILL');
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
  }

  private async terminate(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    const proc = this.current;
    if (!proc) return;
    this.current = undefined;
    await terminateProcess(proc, signal);
  }

  private async prepareArgs(dir: string): Promise<string[]> {
    const { options, tlsMaterial } = this;
    const args: string[] = [];
    if (options.config !== undefined) {
      const file = path.join(dir, 'redis.conf');
      await writeFile(file, options.config);
      args.push(file);
    }
    args.push(
      ...(tlsMaterial
        ? ['--port', '0', '--tls-port', String(this.port)]
        : ['--port', String(this.port)]),
      '--bind',
      HOST,
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
      '--dir',
      dir,
    );
    if (tlsMaterial) {
      const files = {
        ca: path.join(dir, 'ca.crt'),
        cert: path.join(dir, 'server.crt'),
        key: path.join(dir, 'server.key'),
      };
      await writeFile(files.ca, tlsMaterial.ca);
      await writeFile(files.cert, tlsMaterial.cert);
      await writeFile(files.key, tlsMaterial.key, { mode: 0o600 });
      args.push(
        '--tls-cert-file',
        files.cert,
        '--tls-key-file',
        files.key,
        '--tls-ca-cert-file',
        files.ca,
        '--tls-auth-clients',
        'no',
      );
    }
    if (options.password !== undefined) {
      args.push('--requirepass', options.password);
    }
    if (options.aclUser) {
      const { name, password } = options.aclUser;
      args.push('--user', name, 'on', `>${password}`, '~*', '&*', '+@all');
    }
    args.push(...(options.extraArgs ?? []));
    return args;
  }

  private async waitUntilReady(proc: RunningProcess): Promise<void> {
    const deadline = Date.now() + START_TIMEOUT_MS;
    let lastProbeError: string | undefined;
    for (;;) {
      if (proc.exited) {
        const message =
          `redis-server on port ${this.port} exited during startup ` +
          `(${describeExit(proc.exited)})${formatOutput(proc.output)}`;
        throw /address already in use/i.test(proc.output)
          ? new PortInUseError(message)
          : new Error(message, { cause: proc.exited.error });
      }
      lastProbeError = await ping(this.port, this.tlsCa);
      if (lastProbeError === undefined) return;
      if (Date.now() >= deadline) {
        throw new Error(
          `redis-server on port ${this.port} did not answer PING within ` +
            `${START_TIMEOUT_MS}ms (last attempt: ${lastProbeError})` +
            formatOutput(proc.output),
        );
      }
      await sleep(25);
    }
  }
}

// ---------------------------------------------------------------------------
// Processes

/** Every server process that has been spawned and not yet reaped. */
const running = new Set<RunningProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' handlers must be synchronous: signal the children and delete the
  // directories right away, without waiting for anything.
  process.on('exit', () => {
    for (const proc of running) {
      proc.watchdog?.kill('SIGKILL');
      proc.child.kill('SIGKILL');
      try {
        rmSync(proc.dir, { recursive: true, force: true });
      } catch {
        // Best effort: never throw from an exit handler.
      }
    }
    running.clear();
  });
}

function spawnServer(
  binary: string,
  args: string[],
  dir: string,
): RunningProcess {
  // stdout/stderr are piped to us (not inherited) so a leaked server can never
  // hold the test runner's output pipes open; we keep the tail for errors.
  const child = spawn(binary, args, {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc: RunningProcess = {
    child,
    dir,
    output: '',
    exit: new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', (error) => {
        // Only a failed spawn means there is no process; other 'error' events
        // (a failed kill) leave it running and 'exit' will still come.
        if (child.pid === undefined)
          resolve({ code: null, signal: null, error });
      });
    }),
  };
  void proc.exit.then((info) => {
    proc.exited = info;
  });
  const collect = (chunk: Buffer) => {
    proc.output = (proc.output + chunk.toString('utf8')).slice(
      -OUTPUT_TAIL_CHARS,
    );
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);

  // Neither the server nor its pipes keep the event loop alive: a script that
  // forgets stop() still exits, and the 'exit' handler kills the server.
  child.unref();
  (child.stdout as net.Socket | null)?.unref();
  (child.stderr as net.Socket | null)?.unref();

  if (child.pid !== undefined) {
    running.add(proc);
    proc.watchdog = startWatchdog(child.pid, dir);
  }
  return proc;
}

/**
 * A detached `sh` that blocks reading a pipe only we write to. When this
 * process dies in any way (even SIGKILL, when no 'exit' handler runs) the pipe
 * reaches EOF and the watchdog kills the server and removes its directory.
 * On a normal stop we SIGKILL the watchdog first, so it does nothing.
 */
function startWatchdog(pid: number, dir: string): ChildProcess | undefined {
  try {
    const watchdog = spawn(
      '/bin/sh',
      [
        '-c',
        'read -r _ignored; kill -9 "$1" 2>/dev/null; rm -rf -- "$2"',
        'redis-server-watchdog',
        String(pid),
        dir,
      ],
      { stdio: ['pipe', 'ignore', 'ignore'], detached: true },
    );
    watchdog.on('error', () => undefined); // best effort: no sh, no watchdog
    watchdog.stdin?.on('error', () => undefined);
    watchdog.unref();
    (watchdog.stdin as net.Socket | null)?.unref();
    return watchdog;
  } catch {
    return undefined;
  }
}

async function terminateProcess(
  proc: RunningProcess,
  signal: 'SIGTERM' | 'SIGKILL',
): Promise<void> {
  // Keep the event loop alive while we wait for the exit.
  proc.child.ref();
  try {
    if (!proc.exited) {
      proc.child.kill(signal);
      // A stopped process only acts on SIGTERM once continued (SIGKILL needs
      // no help); the SIGTERM is pending, so it runs first.
      if (proc.frozen && signal !== 'SIGKILL') proc.child.kill('SIGCONT');
    }
    if (!(await waitForExit(proc, STOP_TIMEOUT_MS))) {
      proc.child.kill('SIGKILL');
      await proc.exit;
    }
  } finally {
    proc.child.unref();
    proc.watchdog?.kill('SIGKILL');
    running.delete(proc);
    await rm(proc.dir, { recursive: true, force: true });
  }
}

async function waitForExit(
  proc: RunningProcess,
  timeoutMs: number,
): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([proc.exit.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sends PING over a fresh connection. Resolves `undefined` once the server
 * answers (a NOAUTH error counts: it is up, just protected), else a reason.
 */
function ping(
  port: number,
  ca: Buffer | undefined,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = ca
      ? tls.connect({ host: HOST, port, ca })
      : net.connect({ host: HOST, port });
    let settled = false;
    let received = '';
    const finish = (reason: string | undefined) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(reason);
    };
    socket.setTimeout(1_000, () => finish('timed out'));
    socket.once(ca ? 'secureConnect' : 'connect', () => {
      socket.write('PING\r\n');
    });
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const end = received.indexOf('\r\n');
      if (end === -1) return;
      const line = received.slice(0, end);
      const up = /^[+-]/.test(line) && !/^-(LOADING|BUSY)/.test(line);
      finish(up ? undefined : `unexpected reply ${JSON.stringify(line)}`);
    });
    socket.once('error', (error) => finish(error.message));
    socket.once('close', () => finish('connection closed'));
  });
}

// ---------------------------------------------------------------------------
// TLS material

/**
 * Creates a throwaway CA and a server certificate for 127.0.0.1/localhost
 * (EC P-256, valid for 3 days) with the `openssl` command line tool.
 */
async function generateTlsMaterial(): Promise<TlsMaterial> {
  const openssl = findExecutable('openssl');
  if (openssl === undefined) {
    throw new Error(
      'Starting a TLS redis-server needs `openssl` on PATH to create a test ' +
        'certificate: install it with `apt-get update && apt-get install -y openssl`.',
    );
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'redis-test-certs-'));
  const run = (args: string[]) => execFileAsync(openssl, args, { cwd: dir });
  const ecKey = [
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
  ];
  try {
    await run([
      'req',
      '-x509',
      ...ecKey,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '3',
      '-subj',
      '/CN=redis-server test CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    await run([
      'req',
      ...ecKey,
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/CN=127.0.0.1',
    ]);
    await writeFile(
      path.join(dir, 'server.ext'),
      [
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature',
        'extendedKeyUsage=serverAuth',
        '',
      ].join('\n'),
    );
    await run([
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-set_serial',
      `0x${randomBytes(8).toString('hex')}`,
      '-days',
      '3',
      '-extfile',
      'server.ext',
      '-out',
      'server.crt',
    ]);
    const [ca, cert, key] = await Promise.all(
      ['ca.crt', 'server.crt', 'server.key'].map((file) =>
        readFile(path.join(dir, file)),
      ),
    );
    return { ca, cert, key };
  } catch (error) {
    const stderr = (error as { stderr?: unknown }).stderr;
    throw new Error(
      `Creating a test TLS certificate with ${openssl} failed` +
        (stderr ? `:\n${String(stderr).trim()}` : ''),
      { cause: error },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------
// Helpers

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

function buildUrl(port: number, options: RedisServerOptions): string {
  const scheme = options.tls ? 'rediss' : 'redis';
  let auth = '';
  if (options.aclUser) {
    auth = `${encodeURIComponent(options.aclUser.name)}:${encodeURIComponent(options.aclUser.password)}@`;
  } else if (options.password !== undefined) {
    auth = `:${encodeURIComponent(options.password)}@`;
  }
  return `${scheme}://${auth}${HOST}:${port}`;
}

function findExecutable(command: string): string | undefined {
  if (command.includes('/')) {
    return isExecutableFile(command) ? path.resolve(command) : undefined;
  }
  const dirs = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .concat(FALLBACK_BIN_DIRS);
  for (const dir of dirs) {
    const candidate = path.join(dir, command);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function describeExit({ code, signal, error }: ExitInfo): string {
  if (error) return `could not be spawned: ${error.message}`;
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}

function formatOutput(output: string): string {
  const trimmed = output.trim();
  return trimmed ? `. Its output:\n${trimmed}` : '';
}
