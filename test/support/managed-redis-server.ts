import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';

import { setProcessStopped } from './process-state.js';
import type { RedisServerHandle, RedisServerOptions } from './redis-server.js';
import {
  describeExit,
  formatOutput,
  spawnServer,
  terminateProcess,
  type RunningProcess,
} from './redis-server-process.js';
import type { TlsMaterial } from './redis-server-tls.js';

/**
 * One test server on a fixed port: its command line, startup check and
 * lifecycle (stop, kill, restart, freeze, thaw), one operation at a time.
 */

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 10_000;

/** Raised internally when the chosen port was taken before redis bound it. */
export class PortInUseError extends Error {}

export class ManagedRedisServer implements RedisServerHandle {
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
