import type { ChildProcess } from 'node:child_process';
import { spawnTs } from '../../../../test/support/processes.js';
import type { CronInstanceOptions } from './fixtures/cron-instance.js';

const fixture = 'libs/distributed-lock/test/cron/fixtures/cron-instance.ts';
const stopPatienceMs = 5_000;

/** Children still running, killed if the test process exits first. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** A child process running fixtures/cron-instance.ts. */
export class CronInstance {
  /** Its stderr: Nest's log lines, `[LEVEL] context: message`. */
  log = '';
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  private readonly ready: Promise<void>;

  constructor(readonly options: CronInstanceOptions) {
    this.child = spawnTs(fixture, [JSON.stringify(options)]);
    running.add(this.child);
    let stdout = '';
    this.child.stderr?.on('data', (chunk: Buffer) => (this.log += chunk));
    this.exited = new Promise((resolve) =>
      this.child.once('close', () => {
        running.delete(this.child);
        resolve();
      }),
    );
    this.ready = new Promise((resolve, reject) => {
      this.child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes('"event":"ready"')) resolve();
      });
      void this.exited.then(() =>
        reject(new Error(`${options.name} exited before ready:\n${this.log}`)),
      );
    });
  }

  get name(): string {
    return this.options.name;
  }

  /** Resolves once the app started; rejects if it exits or takes `timeoutMs`. */
  async started(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.name} not ready in ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([this.ready, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL, as a crash would; resolves once it is gone. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM (the app closes), SIGKILL if it is still there after 5 s. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), stopPatienceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Log lines at `level` (`ERROR`, `WARN`, `DEBUG`...). */
  lines(level: string): string[] {
    return this.log.split('\n').filter((line) => line.startsWith(`[${level}]`));
  }
}
