import { randomBytes } from 'node:crypto';
import type { Cluster } from 'ioredis';

/** How long a key's wake channel stays subscribed after its last waiter here left. */
const lingerMs = 5_000;

export interface ShardWakeListenerOptions {
  /** The backend's cluster connection; the listener subscribes on a duplicate of it. */
  readonly client: Cluster;
  /** Whether anyone here still waits for `key` (its channel must stay subscribed). */
  readonly inUse: (key: string) => boolean;
  /** A lock was handed to `token`; `key` as the backend names it (no client prefix). */
  readonly onHandoff: (
    token: string,
    fencingToken: number,
    key: string,
  ) => void;
}

/**
 * Wake-ups on Redis Cluster, where a script may only touch its own slot, so
 * a per-process wake list (somewhere else) is out of reach. A hand-off is
 * published instead on the lock's own shard channel, `<lock key>:wake`, in
 * the lock's slot (SPUBLISH; one subscriber connection per master, kept by
 * ioredis across failovers and slot moves), addressed to the process by its
 * id: "#<process id>|<token>|<fence>|<lock key>". A process subscribes to a
 * key's channel before it queues for the key, so no hand-off to it is
 * published unheard; one that is lost all the same (the subscriber
 * reconnecting) is found by the queue's safety check, as with a wake list.
 */
export class ShardWakeListener {
  /** How queue entries name this process: '#' and 96 random bits. */
  readonly scriptName: string;
  private readonly prefix: string;
  private readonly clientKeyPrefix: string;
  private subscriber?: Cluster;
  /** Subscribed channels by key, with their pending unsubscribe. */
  private readonly channels = new Map<
    string,
    { ready: Promise<unknown>; linger?: NodeJS.Timeout }
  >();
  private closed = false;

  constructor(private readonly options: ShardWakeListenerOptions) {
    this.clientKeyPrefix = options.client.options?.keyPrefix ?? '';
    this.scriptName = `#${randomBytes(12).toString('base64url')}`;
    this.prefix = `${this.scriptName}|`;
  }

  /**
   * Subscribes to `key`'s wake channel unless it is already: resolves once
   * the subscription is confirmed, or returns undefined when it was.
   */
  prepare(key: string): Promise<unknown> | undefined {
    if (this.closed) return undefined;
    const known = this.channels.get(key);
    if (known) {
      clearTimeout(known.linger);
      known.linger = undefined;
      return known.ready;
    }
    const subscriber = this.open();
    const entry: { ready: Promise<unknown>; linger?: NodeJS.Timeout } = {
      ready: subscriber.ssubscribe(this.channelOf(key)).catch((error) => {
        if (this.channels.get(key) === entry) this.channels.delete(key);
        throw error;
      }),
    };
    this.channels.set(key, entry);
    return entry.ready;
  }

  /**
   * Nobody here may wait for `key` any more: unsubscribe unless someone does
   * again soon (a waiter registered meanwhile keeps it, and calls this again
   * when it leaves).
   */
  idle(key: string): void {
    const known = this.channels.get(key);
    if (!known || this.closed) return;
    clearTimeout(known.linger);
    known.linger = setTimeout(() => {
      known.linger = undefined;
      if (this.channels.get(key) !== known || this.options.inUse(key)) return;
      this.channels.delete(key);
      this.subscriber?.sunsubscribe(this.channelOf(key)).catch(() => undefined);
    }, lingerMs);
    known.linger.unref();
  }

  /** Wake-ups arrive as they are published: nothing to start. */
  listen(): void {}

  /** Unsubscribes everything and closes the subscriber connections. */
  close(): void {
    this.closed = true;
    for (const { linger } of this.channels.values()) clearTimeout(linger);
    this.channels.clear();
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  /** Subscribed channels and the subscriber's listeners (for leak checks). */
  bookkeeping(): { wakeChannels: number; subscriberListeners: number } {
    const subscriber = this.subscriber;
    return {
      wakeChannels: this.channels.size,
      subscriberListeners: subscriber
        ? subscriber
            .eventNames()
            .reduce((sum, event) => sum + subscriber.listenerCount(event), 0)
        : 0,
    };
  }

  /** The channel as given to ioredis, which adds the client's key prefix itself (a channel is a key to it). */
  private channelOf(key: string): string {
    return `${key}:wake`;
  }

  private open(): Cluster {
    if (this.subscriber) return this.subscriber;
    const subscriber = this.options.client.duplicate(undefined, {
      shardedSubscribers: true,
    });
    // Connection trouble shows on the main client and in every lock call.
    subscriber.on('error', () => undefined);
    subscriber.on('smessage', (_channel: string, message: string) =>
      this.deliver(message),
    );
    this.subscriber = subscriber;
    return subscriber;
  }

  private deliver(message: string): void {
    if (!message.startsWith(this.prefix)) return;
    const first = message.indexOf('|', this.prefix.length);
    const second = message.indexOf('|', first + 1);
    const key = message.slice(second + 1);
    this.options.onHandoff(
      message.slice(this.prefix.length, first),
      Number(message.slice(first + 1, second)),
      this.clientKeyPrefix && key.startsWith(this.clientKeyPrefix)
        ? key.slice(this.clientKeyPrefix.length)
        : key,
    );
  }
}
