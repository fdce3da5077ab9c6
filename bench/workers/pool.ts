import { spawn, type ChildProcess } from 'node:child_process';
import { allCpus, placeProcess } from '../affinity.js';
import { fileURLToPath } from 'node:url';
import type {
  ContentionEvents,
  ContentionSpec,
} from '../scenarios/contention-core.js';
import { compiledWorkerFile } from './compile.js';
import type { OpenRequest, WorkerReply, WorkerRequest } from './protocol.js';
import type { TurnSide } from './turns.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

type Pending = {
  resolve: (reply: WorkerReply & { ok: true }) => void;
  reject: (error: Error) => void;
};

// Distributes the Omit over the request union.
type RequestBody<T = WorkerRequest> = T extends WorkerRequest
  ? Omit<T, 'id'>
  : never;

/** A worker process with an IPC channel, running bench-worker.ts compiled (see compiledWorkerFile). */
export class BenchWorker {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private stderr = '';
  /** Resolves once the worker listens for requests. */
  readonly ready: Promise<unknown>;

  /** The worker's process id (undefined if it could not be started). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** `nodeFlags`: options for `node` itself (V8's too), before the worker's file. */
  constructor(nodeFlags: readonly string[] = []) {
    this.child = spawn(process.execPath, [...nodeFlags, compiledWorkerFile()], {
      cwd: repoRoot,
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.ready = new Promise((resolve, reject) =>
      this.pending.set(0, { resolve, reject }),
    );
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-4_000);
    });
    this.child.on('message', (message) => {
      const reply = message as WorkerReply;
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      if (reply.ok) waiting.resolve(reply);
      else waiting.reject(new Error(reply.error));
    });
    this.child.on('exit', (code, signal) => {
      for (const waiting of this.pending.values()) {
        waiting.reject(
          new Error(
            `benchmark worker exited (${signal ?? code})${this.stderr ? `: ${this.stderr.trim()}` : ''}`,
          ),
        );
      }
      this.pending.clear();
    });
  }

  request(body: RequestBody): Promise<WorkerReply & { ok: true }> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...body, id } as WorkerRequest, (error) => {
        if (error) {
          this.pending.delete(id);
          reject(error);
        }
      });
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        resolve();
        return;
      }
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      // A second stop() finds the channel closed already.
      if (this.child.connected) this.child.disconnect();
    });
  }
}

/**
 * Long-lived worker processes by name (a contender's id, or a side of H on a
 * deployment), started when first needed: a start costs a process and the
 * loading of its contender's module.
 */
export class NamedWorkers {
  private readonly workers = new Map<string, BenchWorker>();
  private readonly used = new WeakSet<BenchWorker>();
  /** The CPUs every worker is kept on (see {@link placeOn}); undefined: the scheduler's choice. */
  private cpus?: string;

  /** The worker named `name`, started now if there is none. */
  for(name: string): BenchWorker {
    let worker = this.workers.get(name);
    if (!worker) {
      worker = new BenchWorker();
      this.workers.set(name, worker);
      if (this.cpus !== undefined) placeProcess(worker.pid, this.cpus);
    }
    return worker;
  }

  /** Keeps every worker, those started later too, on `cpus` (taskset syntax). */
  placeOn(cpus: string): void {
    this.cpus = cpus;
    for (const worker of this.workers.values()) placeProcess(worker.pid, cpus);
  }

  /** Gives every worker back to the scheduler; those started later are left to it. */
  unplace(): void {
    if (this.cpus === undefined) return;
    this.cpus = undefined;
    for (const worker of this.workers.values())
      placeProcess(worker.pid, allCpus());
  }

  /** True the first time it is asked about the worker now named `name` (it warms up then). */
  firstUse(name: string): boolean {
    const worker = this.for(name);
    if (this.used.has(worker)) return false;
    this.used.add(worker);
    return true;
  }

  /**
   * Side `id` of a group that takes turns (see `runInTurns`), run by the
   * worker named `name`; on that worker's first use it warms up alone for
   * `jitWarmupMs` first.
   */
  side(
    id: string,
    open: OpenRequest,
    jitWarmupMs: number,
    name = id,
  ): TurnSide {
    const worker = this.for(name);
    return {
      id,
      worker,
      jitWarmupMs: this.firstUse(name) ? jitWarmupMs : 0,
      open,
    };
  }

  /** Stops the worker named `name` (it failed or hung); the next {@link for} starts a new one. */
  async discard(name: string): Promise<void> {
    const worker = this.workers.get(name);
    this.workers.delete(name);
    await worker?.stop();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.workers.values()].map((w) => w.stop()));
    this.workers.clear();
  }
}

/** The worker processes of one contender in C. */
export class WorkerPool {
  private readonly workers: BenchWorker[];

  constructor(size: number, nodeFlags: readonly string[] = []) {
    this.workers = Array.from(
      { length: size },
      () => new BenchWorker(nodeFlags),
    );
  }

  /** Resolves when every worker has started. */
  async ready(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.ready));
  }

  get size(): number {
    return this.workers.length;
  }

  /** Each of the first `count` workers opens its own instance of the contender. */
  async open(
    contenderId: string,
    urls: string[],
    count = this.workers.length,
  ): Promise<void> {
    await Promise.all(
      this.workers
        .slice(0, count)
        .map((w) => w.request({ type: 'open', contenderId, urls })),
    );
  }

  /** Runs `specs[i]` on worker i (on as many workers as there are specs). */
  async run(specs: readonly ContentionSpec[]): Promise<ContentionEvents[]> {
    const replies = await Promise.all(
      specs.map((spec, i) => this.workers[i].request({ type: 'run', spec })),
    );
    return replies.map((r) => r.events!);
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.request({ type: 'close' })));
  }

  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
  }
}
