import type { ChildProcess } from 'node:child_process';
import { isProcessStopped } from '../../../../test/support/process-state.js';
import { spawnTs } from '../../../../test/support/processes.js';

export interface HolderEvent {
  readonly event: string;
  readonly at: number;
  readonly [field: string]: unknown;
}

/** The holder workers of this folder. */
export const SEMAPHORE_HOLDER =
  'libs/distributed-lock/test/faults/workers/semaphore-holder.ts';
export const RWLOCK_HOLDER =
  'libs/distributed-lock/test/faults/workers/rwlock-holder.ts';

/**
 * A holder process (one of the workers in ./workers, started with its options
 * as one JSON argument) and the events it printed, one JSON line each.
 */
export class HolderProcess {
  readonly events: HolderEvent[] = [];
  readonly child: ChildProcess;
  private listeners: (() => void)[] = [];
  private output = '';

  constructor(worker: string, options: Record<string, unknown>) {
    this.child = spawnTs(worker, [JSON.stringify(options)]);
    let pending = '';
    this.child.stdout?.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString()).split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        this.events.push(JSON.parse(line) as HolderEvent);
        for (const listener of this.listeners) listener();
      }
    });
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.output += chunk.toString();
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** The first `event`, waiting up to `timeoutMs` for it; rejects on an `error` event. */
  waitFor(event: string, timeoutMs = 15_000): Promise<HolderEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const seen = this.events.find((e) => e.event === event);
        const failed = this.events.find((e) => e.event === 'error');
        if (!seen && !failed) return;
        clearTimeout(timer);
        this.listeners = this.listeners.filter((l) => l !== check);
        if (seen) resolve(seen);
        else reject(new Error(`holder failed: ${String(failed!.message)}`));
      };
      const timer = setTimeout(() => {
        this.listeners = this.listeners.filter((l) => l !== check);
        reject(
          new Error(
            `holder sent no "${event}" in ${timeoutMs} ms (stopped: ${String(isProcessStopped(this.pid))}): ${JSON.stringify(this.events)}\n${this.output}`,
          ),
        );
      }, timeoutMs);
      this.listeners.push(check);
      check();
    });
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}
