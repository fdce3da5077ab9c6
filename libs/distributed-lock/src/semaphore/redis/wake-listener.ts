import { Cluster, type Redis } from 'ioredis';

/** One waiting acquisition, as the listener sees it. */
export class SemaphoreWaiter {
  /** Wake-ups received so far: compare before and after an attempt. */
  wakes = 0;
  private wakeUp?: () => void;

  constructor(
    readonly channel: string,
    readonly token: string,
  ) {}

  /** Called by the listener when the store names this waiter as one that now fits. */
  wake(): void {
    this.wakes += 1;
    this.wakeUp?.();
  }

  /**
   * Resolves after `ms`, at the next wake-up, or when `signal` aborts,
   * whichever comes first.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, Math.max(1, ms));
      signal?.addEventListener('abort', done, { once: true });
      this.wakeUp = done;
    });
  }
}

/**
 * Wake-ups for waiting semaphore acquisitions, over pub/sub on a connection
 * of its own. A script that frees permits publishes, on the semaphore's
 * channel, the token of every queued caller that now fits (see wakeFitting
 * in scripts/common.lua); the listener wakes each of those waiters that is
 * here. A channel is subscribed while anyone here waits on it. A message
 * lost (the connection dropped) only delays: every waiter also wakes at the
 * earliest lease end and to renew its place in the queue.
 */
export class SemaphoreWakeListener {
  private connection?: Redis | Cluster;
  /** channel → waiters by token. */
  private readonly channels = new Map<
    string,
    { subscribed: Promise<unknown>; waiters: Map<string, SemaphoreWaiter> }
  >();

  constructor(private readonly client: Redis | Cluster) {}

  /** Registers a waiter; resolves once its channel is subscribed. */
  async join(channel: string, token: string): Promise<SemaphoreWaiter> {
    const waiter = new SemaphoreWaiter(channel, token);
    let entry = this.channels.get(channel);
    if (!entry) {
      entry = {
        subscribed: this.open().subscribe(channel),
        waiters: new Map(),
      };
      this.channels.set(channel, entry);
    }
    entry.waiters.set(token, waiter);
    try {
      await entry.subscribed;
    } catch (error) {
      this.leave(waiter);
      throw error;
    }
    return waiter;
  }

  leave(waiter: SemaphoreWaiter): void {
    const entry = this.channels.get(waiter.channel);
    if (!entry || entry.waiters.get(waiter.token) !== waiter) return;
    entry.waiters.delete(waiter.token);
    if (entry.waiters.size > 0) return;
    this.channels.delete(waiter.channel);
    void this.connection?.unsubscribe(waiter.channel).catch(() => undefined);
  }

  close(): void {
    this.channels.clear();
    this.connection?.disconnect();
    this.connection = undefined;
  }

  private open(): Redis | Cluster {
    if (this.connection) return this.connection;
    const connection: Redis | Cluster =
      this.client instanceof Cluster
        ? this.client.duplicate()
        : this.client.duplicate();
    connection.on('error', () => undefined);
    connection.on('message', (channel: string, token: string) => {
      this.channels.get(channel)?.waiters.get(token)?.wake();
    });
    this.connection = connection;
    return connection;
  }
}
