import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { getFreePort } from '../../../test/support/ports.js';
import {
  nodeArgs,
  spawnGuarded,
  type GuardedProcess,
} from './child-process.js';

export const APP_SOURCE = 'apps/flash-sale/src/main.ts';
export const APP_BUILD = 'dist/apps/flash-sale/main.js';

export interface AppInstanceOptions {
  /** Position in the list of instances, for logs. */
  readonly index: number;
  readonly port: number;
  /** The instance's complete environment (PORT is set from `port`). */
  readonly env: NodeJS.ProcessEnv;
  /** Run `dist/apps/flash-sale/main.js` instead of the sources. */
  readonly fromBuild: boolean;
  /** Longest wait for `GET /health` to answer 200 after a start, in ms. */
  readonly startTimeoutMs: number;
  /** Called with every line the instance logs. */
  readonly onLine?: (index: number, line: string) => void;
  /**
   * Another free port, for a first start that found `port` taken (see
   * {@link AppInstance.start}). Default: one the system hands out.
   */
  readonly choosePort?: () => Promise<number>;
}

/** Starts on a new port after finding the chosen one taken, at most this often. */
const portRetries = 3;

/** One flash-sale app instance, a separate OS process on its own port. */
export class AppInstance {
  private process?: GuardedProcess;
  /** How often it was started (1 + restarts). */
  starts = 0;
  private currentPort: number;
  /** Whether it ever answered `GET /health`: from then on its port is its own. */
  private served = false;

  constructor(private readonly options: AppInstanceOptions) {
    this.currentPort = options.port;
  }

  get index(): number {
    return this.options.index;
  }

  /** The port it listens on: the one it was given, or another if that was taken at its first start. */
  get port(): number {
    return this.currentPort;
  }

  get pid(): number | undefined {
    return this.process?.hasExited() ? undefined : this.process?.child.pid;
  }

  /** The last lines the current (or last) process logged. */
  logTail(): string {
    return this.process?.tail() ?? '';
  }

  /**
   * Starts the process and resolves once `GET /health` answers 200.
   *
   * A port found free is free only until something else binds it, and any
   * outgoing connection's local port counts: an instance's pool connections
   * to Redis and the database can take the very port another instance was
   * told to listen on. An instance that never served yet and exits with
   * EADDRINUSE is started again on a port from `choosePort`; once it served,
   * clients know its port, and it keeps it.
   */
  async start(): Promise<void> {
    for (let retry = 0; ; retry++) {
      try {
        await this.startOnce();
        this.served = true;
        return;
      } catch (error) {
        if (
          this.served ||
          retry >= portRetries ||
          !this.logTail().includes('EADDRINUSE')
        )
          throw error;
        this.options.onLine?.(
          this.index,
          `[loadtest] port ${this.currentPort} was taken; starting again on another`,
        );
        const { choosePort = getFreePort } = this.options;
        this.currentPort = await choosePort();
      }
    }
  }

  private async startOnce(): Promise<void> {
    if (this.pid !== undefined) throw new Error(`${this.name} is running`);
    const { index, env, fromBuild, onLine } = this.options;
    const port = this.currentPort;
    this.starts += 1;
    const proc = spawnGuarded(
      nodeArgs(fromBuild ? APP_BUILD : APP_SOURCE),
      { ...env, PORT: String(port) },
      onLine && ((line) => onLine(index, line)),
    );
    this.process = proc;
    const deadline = Date.now() + this.options.startTimeoutMs;
    for (;;) {
      if (proc.hasExited()) {
        const { code, signal } = await proc.exited;
        throw new Error(
          `${this.name} exited during startup (${signal ?? `code ${code}`}). Its last lines:\n${proc.tail()}`,
        );
      }
      if ((await healthStatus(port)) === 200) return;
      if (Date.now() > deadline) {
        await proc.stop('SIGKILL');
        throw new Error(
          `${this.name} did not answer GET /health with 200 within ${this.options.startTimeoutMs} ms. Its last lines:\n${proc.tail()}`,
        );
      }
      await sleep(150);
    }
  }

  /** SIGKILL, as a crash: no shutdown hook runs, its locks stay held until its lock session lapses. */
  async kill(): Promise<void> {
    await this.process?.stop('SIGKILL');
  }

  /**
   * SIGSTOP: the process stays frozen, holding whatever it holds, until
   * `resume`. Resolves once it no longer runs.
   */
  async pause(): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) throw new Error(`${this.name} is not running`);
    process.kill(pid, 'SIGSTOP');
    await untilStopped(pid);
  }

  /** SIGCONT after `pause`. */
  resume(): void {
    const pid = this.pid;
    if (pid !== undefined) process.kill(pid, 'SIGCONT');
  }

  /** SIGTERM (the app's graceful shutdown), SIGKILL after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    await this.process?.stop('SIGTERM', graceMs);
  }

  private get name(): string {
    return `Instance ${this.options.index + 1} (port ${this.currentPort})`;
  }
}

/** GET /health on a fresh connection: the status, or 0 when nothing answered within a second. */
export function healthStatus(port: number): Promise<number> {
  return new Promise((resolve) => {
    const request = http.get(
      {
        host: '127.0.0.1',
        port,
        path: '/health',
        agent: false,
        timeout: 1_000,
      },
      (response) => {
        response.resume();
        response.once('end', () => resolve(response.statusCode ?? 0));
        response.once('error', () => resolve(0));
      },
    );
    request.once('timeout', () => request.destroy(new Error('timeout')));
    request.once('error', () => resolve(0));
  });
}

/**
 * Resolves once process `pid` is stopped: a signal is delivered when the
 * target next runs, which on another core may be a moment after kill()
 * returned. Linux says so in /proc; elsewhere, 20 ms is taken as enough.
 */
async function untilStopped(pid: number): Promise<void> {
  const deadline = performance.now() + 1_000;
  while (performance.now() < deadline) {
    let stat: string;
    try {
      stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    } catch {
      await sleep(20);
      return;
    }
    // "pid (comm) state ...": the state follows the last ')'.
    const state = stat.slice(
      stat.lastIndexOf(')') + 2,
      stat.lastIndexOf(')') + 3,
    );
    if (state === 'T' || state === 't' || state === 'Z' || state === 'X')
      return;
    await sleep(1);
  }
  throw new Error(`process ${pid} did not stop within 1 s of SIGSTOP`);
}
