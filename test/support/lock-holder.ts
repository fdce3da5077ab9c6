import type { ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';

import { setProcessStopped } from './process-state.js';
import { spawnTs } from './processes.js';

/**
 * Separate Node processes that hold a lock (test/support/workers/lock-holder.ts,
 * or another worker with the same protocol: {@link startHolderProcess}), for
 * fault tests that SIGKILL, SIGSTOP or SIGTERM a holder. Each reports what
 * happens to it as events ({@link HolderEvent}); the worker's header lists them.
 *
 * No holder outlives the test process: those still running when it exits are
 * SIGKILLed, and a holder whose parent disappeared exits by itself.
 */

/** What a holder does; passed to the child as one JSON argument. */
export interface LockHolderOptions {
  /** Redis URL. */
  url: string;
  /** The lock key, without prefix (stored as `lock:{<key>}`). */
  key: string;
  /**
   * Hold this many locks at once instead: `<key>:0` ... `<key>:<count - 1>`,
   * acquired 500 at a time; `acquired` comes once all are held. Not with
   * `fence` or `resourceUrl`.
   */
  count?: number;
  /**
   * Explicit lease in ms; omitted: the hold is bound to the process session
   * (with `sessionTtl`), or else the watchdog renews the lease.
   */
  leaseTime?: number;
  /** TTL of the process session in ms. Omitted: no session. */
  sessionTtl?: number;
  /** The backend's `freeOnDisconnect`. Default false. */
  freeOnDisconnect?: boolean;
  /** The watchdog's lease in ms. Default 30 000. */
  watchdogLeaseTime?: number;
  /**
   * Report the hold's local deadline (`expiry`) whenever it moves, e.g. when
   * a session renewal is confirmed.
   */
  reportExpiry?: boolean;
  /** How long to wait for a busy lock, in ms. Default 5 000. */
  waitTime?: number;
  /** How long to hold after acquiring, in ms, or `'forever'` (until SIGTERM). Default `'forever'`. */
  holdMs?: number | 'forever';
  /** The backend's `handoffLeaseMs` (also how often a waiter checks on a dead holder). */
  handoffLeaseMs?: number;
  /** The backend's `commandTimeoutMs`. */
  commandTimeoutMs?: number;
  /** Ask a fencing token on acquiring (reported as `fence` of `acquired`). */
  fence?: boolean;
  /**
   * A served FencedResource: on acquiring, the holder enters it (`entered`)
   * and, with `fence`, writes its token (`wrote`); it leaves before releasing.
   */
  resourceUrl?: string;
  /** With `fence` and `resourceUrl`: write the token again every this many ms while holding. */
  writeEveryMs?: number;
  /** The holder's name at the resource. Default `holder-<pid>`. */
  name?: string;
  /**
   * Acquire, hold and release again and again until this many ms have passed
   * since `ready` (each round reports `acquiring` ... `released`), then report
   * `done` and exit. Default: once.
   */
  repeatForMs?: number;
}

/** One JSON line a holder printed. */
export interface HolderEvent {
  event: string;
  at?: number;
  [k: string]: unknown;
}

/** A running (or exited) holder process started by {@link startLockHolder}. */
export interface LockHolder {
  readonly pid: number;
  /** Every event so far, in order. */
  readonly events: readonly HolderEvent[];
  /** The tail of its stderr (and of stdout lines that were not events). */
  readonly output: string;
  /**
   * Resolves with the first event of that name (already seen or future);
   * rejects after `timeoutMs` (default 10 s) or if the child exits first, with
   * its stderr in the message. While the child is still starting, the clock
   * starts at its `ready`: start-up (compiling and loading the library) gets
   * up to 20 s of its own, as on a busy machine it can take several seconds.
   */
  waitFor(event: string, timeoutMs?: number): Promise<HolderEvent>;
  /** Freezes the process (SIGSTOP); returns once it is stopped. */
  pause(): void;
  /** Lets it run again (SIGCONT). */
  resume(): void;
  /** SIGKILL, as a crash would; resolves once it has exited. */
  kill(): Promise<void>;
  /**
   * SIGTERM (continuing it first if paused): it releases what it holds and
   * exits. Resolves with the exit code (null if killed by a signal); SIGKILL
   * after 5 s.
   */
  stop(): Promise<number | null>;
}

const WORKER = 'test/support/workers/lock-holder.ts';
const DEFAULT_WAIT_MS = 10_000;
const START_UP_MS = 20_000;
const STOP_TIMEOUT_MS = 5_000;
const OUTPUT_TAIL_CHARS = 8_000;

/** Starts a holder process; it starts acquiring as soon as it is connected (`ready`). */
export function startLockHolder(options: LockHolderOptions): LockHolder {
  return startHolderProcess(WORKER, options);
}

/**
 * Starts another holder worker (a TypeScript file of this repo, such as the
 * semaphore and read-write lock holders of the fault tests) with `options`
 * as its one JSON argument. It must speak the lock holder's protocol: one
 * JSON event per line on stdout, `ready` once started.
 */
export function startHolderProcess(
  worker: string,
  options: object,
): LockHolder {
  installExitHook();
  return new HolderProcess(worker, spawnTs(worker, [JSON.stringify(options)]));
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Waiter {
  event: string;
  resolve: (event: HolderEvent) => void;
  reject: (error: Error) => void;
  timeoutMs: number;
  timer?: NodeJS.Timeout;
}

/** Holders not exited yet. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of running) child.kill('SIGKILL');
    running.clear();
  });
}

class HolderProcess implements LockHolder {
  readonly pid: number;
  readonly events: HolderEvent[] = [];
  output = '';
  private readonly exit: Promise<Exit>;
  private exited?: Exit;
  private waiters: Waiter[] = [];
  private paused = false;

  constructor(
    worker: string,
    private readonly child: ChildProcess,
  ) {
    if (child.pid === undefined) throw new Error(`Could not start ${worker}`);
    this.pid = child.pid;
    running.add(child);
    let pending = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString('utf8')).split('\n');
      pending = lines.pop()!;
      for (const line of lines) this.line(line);
    });
    child.stderr?.on('data', (chunk: Buffer) => this.keep(chunk.toString()));
    // 'close' comes after the last output, so every event is seen by then.
    this.exit = new Promise((resolve) =>
      child.once('close', (code, signal) => {
        if (pending) this.line(pending);
        running.delete(child);
        this.exited = { code, signal };
        for (const waiter of this.waiters.splice(0)) {
          clearTimeout(waiter.timer);
          waiter.reject(this.failure(`exited before "${waiter.event}"`));
        }
        resolve(this.exited);
      }),
    );
    // A forgotten holder does not keep the test process alive (the exit
    // hook kills it); waiting on it refs it again.
    this.setRef(false);
  }

  waitFor(event: string, timeoutMs = DEFAULT_WAIT_MS): Promise<HolderEvent> {
    const seen = this.events.find((e) => e.event === event);
    if (seen) return Promise.resolve(seen);
    if (this.exited)
      return Promise.reject(this.failure(`exited before "${event}"`));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { event, resolve, reject, timeoutMs };
      this.waiters.push(waiter);
      this.arm(waiter);
    });
  }

  /** (Re)starts a waiter's clock: the start-up budget until `ready`, then its own. */
  private arm(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const started = this.events.some((e) => e.event === 'ready');
    const ms = started
      ? waiter.timeoutMs
      : Math.max(waiter.timeoutMs, START_UP_MS);
    const missing = started ? waiter.event : 'ready';
    waiter.timer = setTimeout(() => {
      this.waiters = this.waiters.filter((w) => w !== waiter);
      waiter.reject(this.failure(`sent no "${missing}" within ${ms} ms`));
    }, ms);
  }

  pause(): void {
    this.signalState(true);
  }

  resume(): void {
    this.signalState(false);
  }

  async kill(): Promise<void> {
    this.setRef(true);
    if (!this.exited) this.child.kill('SIGKILL');
    await this.exit;
  }

  async stop(): Promise<number | null> {
    this.setRef(true);
    if (!this.exited) {
      this.child.kill('SIGTERM');
      if (this.paused) this.child.kill('SIGCONT');
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, STOP_TIMEOUT_MS);
    });
    if ((await Promise.race([this.exit, late])) === undefined) {
      this.child.kill('SIGKILL');
    }
    clearTimeout(timer);
    return (await this.exit).code;
  }

  private signalState(stopped: boolean): void {
    if (this.exited) throw this.failure('has exited');
    setProcessStopped(this.pid, stopped);
    this.paused = stopped;
  }

  private line(line: string): void {
    let event: HolderEvent | undefined;
    try {
      const parsed = JSON.parse(line) as unknown;
      if (typeof (parsed as HolderEvent | null)?.event === 'string') {
        event = parsed as HolderEvent;
      }
    } catch {
      // Not an event: keep it with the output.
    }
    if (!event) {
      if (line.trim()) this.keep(`${line}\n`);
      return;
    }
    this.events.push(event);
    for (const waiter of this.waiters.filter((w) => w.event === event.event)) {
      clearTimeout(waiter.timer);
      waiter.resolve(event);
    }
    this.waiters = this.waiters.filter((w) => w.event !== event.event);
    if (event.event === 'ready') {
      for (const waiter of this.waiters) this.arm(waiter);
    }
  }

  private keep(text: string): void {
    this.output = (this.output + text).slice(-OUTPUT_TAIL_CHARS);
  }

  private setRef(on: boolean): void {
    for (const handle of [this.child, this.child.stdout, this.child.stderr]) {
      const refable = handle as
        (Readable & { ref?(): void; unref?(): void }) | null;
      if (on) refable?.ref?.();
      else refable?.unref?.();
    }
  }

  private failure(what: string): Error {
    const exit = this.exited
      ? ` (${this.exited.signal ? `killed by ${this.exited.signal}` : `exit code ${this.exited.code}`})`
      : '';
    const output = this.output.trim();
    return new Error(
      `Lock holder ${this.pid} ${what}${exit}. Events: ${JSON.stringify(this.events.map((e) => e.event))}` +
        (output ? `. Its output:\n${output}` : ''),
    );
  }
}
