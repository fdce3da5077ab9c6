// What a deadline that settled or expired keeps instead of its handler, so
// that nothing of its call stays reachable from the queue of deadlines.
const nothingToExpire = (): void => undefined;

/** The clock of one call: see {@link CallDeadlines}. */
export class CallDeadline {
  private state: 'running' | 'settled' | 'expired' = 'running';

  /** @internal Created by {@link CallDeadlines.start}. */
  constructor(
    readonly dueAt: number,
    private onExpired: () => void,
  ) {}

  get running(): boolean {
    return this.state === 'running';
  }

  /** @internal See {@link CallDeadlines.settle}. */
  settle(): boolean {
    if (this.state !== 'running') return false;
    this.state = 'settled';
    this.onExpired = nothingToExpire;
    return true;
  }

  /** @internal */
  expire(): void {
    if (this.state !== 'running') return;
    this.state = 'expired';
    const onExpired = this.onExpired;
    this.onExpired = nothingToExpire;
    onExpired();
  }
}

/**
 * Deadlines of Redis calls that all share one time limit.
 *
 * A timer per call cost more than everything else the lock does in Node on an
 * uncontended acquire and release: calls that run one at a time make Node
 * create and drop a timer list, and toggle the event loop's reference, for
 * each of them. With one limit for all, deadlines fall due in the order the
 * calls started, so a FIFO and one timer, armed for the oldest unfinished
 * call, serve them all. The timer is unreferenced: a pending call has an open
 * connection, and that keeps the process alive.
 */
export class CallDeadlines {
  private readonly queue: (CallDeadline | undefined)[] = [];
  /** Index of the oldest entry still in {@link queue}. */
  private head = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly limitMs: number) {}

  /** How many deadlines are kept, settled ones included until swept (for leak checks). */
  get size(): number {
    return this.queue.length - this.head;
  }

  /** Starts the clock of one call; `onExpired` runs unless it settles in time. */
  start(onExpired: () => void): CallDeadline {
    const deadline = new CallDeadline(Date.now() + this.limitMs, onExpired);
    this.queue.push(deadline);
    this.timer ??= this.arm(this.limitMs);
    return deadline;
  }

  /**
   * The call answered. Returns false when it answered too late: its deadline
   * had passed and the caller was already told.
   */
  settle(deadline: CallDeadline): boolean {
    const inTime = deadline.settle();
    // Replies on one connection come in the order of the calls, so the call
    // that settles is nearly always the oldest one.
    this.dropFinished();
    return inTime;
  }

  /** Stops the timer once nothing runs any more (close). */
  stopWhenIdle(): void {
    if (this.head === this.queue.length && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private arm(delayMs: number): NodeJS.Timeout {
    const timer = setTimeout(this.sweepAfterReads, Math.max(0, delayMs));
    timer.unref();
    return timer;
  }

  /**
   * Node runs due timers before it reads sockets: after this process stalled
   * past a deadline (a GC pause, a CPU-bound handler), answers that came in
   * time would be read only after the sweep had expired their calls. The
   * sweep waits for the check phase, after one pass over the sockets. (Not
   * unreferenced: the loop would then wait in that pass for the next I/O.)
   */
  private readonly sweepAfterReads = (): void => {
    setImmediate(this.sweep);
  };

  private readonly sweep = (): void => {
    this.timer = undefined;
    const now = Date.now();
    while (this.head < this.queue.length) {
      const oldest = this.queue[this.head] as CallDeadline;
      if (oldest.running) {
        if (oldest.dueAt > now) break;
        oldest.expire();
      }
      this.queue[this.head] = undefined;
      this.head += 1;
    }
    this.compact();
    if (this.head < this.queue.length) {
      this.timer = this.arm(
        (this.queue[this.head] as CallDeadline).dueAt - now,
      );
    }
  };

  private dropFinished(): void {
    while (this.head < this.queue.length && !this.queue[this.head]?.running) {
      this.queue[this.head] = undefined;
      this.head += 1;
    }
    this.compact();
  }

  private compact(): void {
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }
}
