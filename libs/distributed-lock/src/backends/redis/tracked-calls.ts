import { LockBackendError } from '../../errors/lock-errors.js';
import { settlesWithin } from '../answer-deadline.js';
import { CallDeadlines } from './call-deadlines.js';

/**
 * The Redis calls of one backend: each is bounded by the command timeout,
 * whatever the client's own settings (an offline queue without timeout would
 * otherwise hang a request forever), and every call or piece of work that
 * may still send commands is counted as under way, so that closing can let
 * it finish before the connection goes.
 */
export class TrackedCalls {
  private readonly deadlines: CallDeadlines;
  private underWay = 0;
  private onIdle?: () => void;

  constructor(private readonly timeoutMs: number) {
    this.deadlines = new CallDeadlines(timeoutMs);
  }

  /** Calls and work under way, and deadlines kept (for leak checks). */
  get sizes(): { underWay: number; deadlines: number } {
    return { underWay: this.underWay, deadlines: this.deadlines.size };
  }

  /** Counts one piece of work as under way until {@link end}. */
  begin(): void {
    this.underWay += 1;
  }

  readonly end = (): void => {
    this.underWay -= 1;
    if (this.underWay === 0) this.onIdle?.();
  };

  /** Counts `work` as under way until it settles. */
  track<T>(work: Promise<T>): Promise<T> {
    this.begin();
    work.then(this.end, this.end);
    return work;
  }

  /**
   * Runs one Redis call with the deadline, counted as under way until it is
   * answered. `onAnswer`, when given, turns a timely answer into the result;
   * an answer that comes after the caller was told of the timeout is handed
   * to `onLate` instead.
   */
  call<T, R = T>(
    pending: Promise<T>,
    what: string,
    onLate?: (value: T) => void,
    onAnswer?: (value: T) => R | Promise<R>,
  ): Promise<R> {
    this.begin();
    return new Promise<R>((resolve, reject) => {
      const deadline = this.deadlines.start(() => {
        this.end();
        reject(
          new LockBackendError(
            `Redis did not answer the lock ${what} within ${this.timeoutMs} ms`,
          ),
        );
      });
      pending.then(
        (value) => {
          if (!this.deadlines.settle(deadline)) {
            onLate?.(value);
            return;
          }
          try {
            resolve(onAnswer ? onAnswer(value) : (value as unknown as R));
          } catch (error) {
            reject(error as Error);
          } finally {
            this.end();
          }
        },
        (error: unknown) => {
          if (!this.deadlines.settle(deadline)) return;
          this.end();
          reject(
            new LockBackendError(
              `Redis lock ${what} failed: ${(error as Error)?.message ?? String(error)}`,
              { cause: error },
            ),
          );
        },
      );
    });
  }

  /**
   * Waits until nothing is under way, at most `ms` in all (answers that keep
   * arriving may keep starting work), then stops the deadline timer once the
   * last call is answered or expired.
   */
  async drain(ms: number): Promise<void> {
    const patience = Date.now() + ms;
    while (this.underWay > 0 && Date.now() < patience) {
      const idle = new Promise<void>((resolve) => (this.onIdle = resolve));
      await settlesWithin(idle, patience - Date.now());
    }
    this.onIdle = undefined;
    this.deadlines.stopWhenIdle();
  }
}
