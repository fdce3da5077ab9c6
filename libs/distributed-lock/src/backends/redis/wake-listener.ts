import { randomBytes } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Redis } from 'ioredis';

/** Seconds a blocking pop waits before the listener checks whether it is still needed. */
const listenPollSeconds = 1;

export interface WakeListenerOptions {
  /** The backend's connection; the listener blocks on a duplicate of it. */
  readonly client: Redis;
  /** Prefix of the wake list's name (the lock key prefix). */
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  /** Whether anyone in this process still waits for a hand-off. */
  readonly needed: () => boolean;
  /** A lock was handed to `token`; `key` as the backend names it (no client prefix). */
  readonly onHandoff: (
    token: string,
    fencingToken: number,
    key: string,
  ) => void;
}

/**
 * This process's wake list: a release that hands a lock to a waiter in this
 * process pushes "<token>|<fence>|<lock key>" there, and one blocking
 * connection pops it while anyone here waits. Nobody polls Redis for a lock.
 */
export class WakeListener {
  /** The wake list's name as scripts see it (with the client's own key prefix). */
  readonly scriptName: string;
  private readonly name: string;
  private readonly clientKeyPrefix: string;
  private blocking?: Redis;
  private listening = false;
  private closed = false;

  constructor(private readonly options: WakeListenerOptions) {
    this.clientKeyPrefix = options.client.options?.keyPrefix ?? '';
    // 96 random bits tell processes apart; every queue entry names its list.
    const instanceId = randomBytes(12).toString('base64url');
    this.name = `${options.keyPrefix}wake:${instanceId}`;
    this.scriptName = this.clientKeyPrefix + this.name;
  }

  /** Every wake-up comes to the one list: nothing to prepare per key. */
  prepare(_key: string): undefined {
    return undefined;
  }

  /** Nothing is kept per key. */
  idle(_key: string): void {}

  /** Blocks on the wake list while it is needed. One loop at a time. */
  listen(): void {
    if (this.listening || this.closed) return;
    this.listening = true;
    void this.loop();
  }

  /** Whether it has a blocking connection, and that connection's listeners (for leak checks). */
  bookkeeping(): { blockingConnections: number; blockingListeners: number } {
    const blocking = this.blocking;
    return {
      blockingConnections: blocking ? 1 : 0,
      blockingListeners: blocking
        ? blocking
            .eventNames()
            .reduce((sum, event) => sum + blocking.listenerCount(event), 0)
        : 0,
    };
  }

  /** Stops listening and closes the blocking connection. */
  close(): void {
    this.closed = true;
    this.blocking?.disconnect();
    this.blocking = undefined;
  }

  private async loop(): Promise<void> {
    while (!this.closed && this.options.needed()) {
      const blocking = (this.blocking ??= this.openBlocking());
      try {
        const popped = await blocking.blpop(this.name, listenPollSeconds);
        if (popped) {
          this.deliver(popped[1]);
          // Let the woken holder run (and send its own commands) before the
          // next pop is written: under contention it is on the critical path.
          await nextTurn();
        }
      } catch {
        if (this.closed) break;
        if (blocking.status === 'ready') {
          // Connected, yet the pop did not answer in time: Redis may still
          // answer it with a message nobody would read. Use a new connection.
          blocking.disconnect();
          if (this.blocking === blocking) this.blocking = undefined;
        }
        // Redis is away: waiters time out on their own; try again shortly.
        await new Promise((resolve) => setTimeout(resolve, 100).unref());
      }
    }
    this.listening = false;
    if (!this.closed && this.options.needed()) this.listen();
  }

  private deliver(message: string): void {
    const first = message.indexOf('|');
    const second = message.indexOf('|', first + 1);
    const key = message.slice(second + 1);
    this.options.onHandoff(
      message.slice(0, first),
      Number(message.slice(first + 1, second)),
      this.clientKeyPrefix && key.startsWith(this.clientKeyPrefix)
        ? key.slice(this.clientKeyPrefix.length)
        : key,
    );
  }

  /**
   * The blocking connection. The client's own time limits are meant for short
   * commands: one shorter than the pop would drop the pop while Redis may
   * still answer it with a wake-up, which would then be lost.
   */
  private openBlocking(): Redis {
    const blocking = this.options.client.duplicate({
      commandTimeout: listenPollSeconds * 1000 + this.options.commandTimeoutMs,
      blockingTimeout: undefined,
      socketTimeout: undefined,
    });
    // Connection trouble shows on the main client and in every lock call.
    blocking.on('error', () => undefined);
    return blocking;
  }
}
