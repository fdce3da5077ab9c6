import type { Redis } from 'ioredis';
import { askEveryNode } from './node-votes.js';
import { wakeChannel } from './quorum-scripts.js';

/** The waiters of one key in this process and its subscription on every node. */
interface Channel {
  readonly listeners: Set<(releasedBy: string) => void>;
  /** Resolves once every node confirmed, refused or timed out the SUBSCRIBE. */
  readonly subscribed: Promise<unknown>;
}

/**
 * Push wake-ups for waiters: release.lua publishes on the key's channel when
 * it frees a lock somebody waits for, and this process listens on one
 * subscriber connection per node (a duplicate of the node's client, opened
 * on first use). A key's channel is subscribed while anybody here waits for
 * it and unsubscribed when the last one stops.
 *
 * A waiter listens before the attempt that finds the lock busy, and only
 * once the SUBSCRIBE was confirmed, so a release between that attempt and
 * its wait is not missed. Messages lost while a subscriber reconnects are
 * covered by the waiter's timer at the holder's remaining lease.
 */
export class WakeChannels {
  private readonly subscribers: (Redis | undefined)[];
  private readonly channels = new Map<string, Channel>();
  /** Channel name (as each node names it) to key. */
  private readonly keysByChannel = new Map<string, string>();
  private closed = false;

  /**
   * @param reachable whether a node's connection is up: a SUBSCRIBE to a
   *   node that is down is still sent (it takes effect when the node is
   *   back) but not waited for
   */
  constructor(
    private readonly clients: readonly Redis[],
    private readonly timeoutMs: number,
    private readonly reachable: (node: number) => boolean = () => true,
  ) {
    this.subscribers = clients.map(() => undefined);
  }

  /** Keys listened for right now (for tests). */
  get listenedKeys(): number {
    return this.channels.size;
  }

  /**
   * Calls `onWake` with the releasing token whenever a node publishes that
   * `key` was freed, until the returned function is called. Resolves once
   * every node confirmed the subscription, failed or took longer than the
   * node timeout.
   */
  async listen(
    key: string,
    onWake: (releasedBy: string) => void,
  ): Promise<() => void> {
    let channel = this.channels.get(key);
    if (!channel) {
      channel = { listeners: new Set(), subscribed: this.subscribe(key) };
      this.channels.set(key, channel);
    }
    channel.listeners.add(onWake);
    const stop = (): void => this.unlisten(key, onWake);
    await channel.subscribed;
    return stop;
  }

  /** Closes the subscriber connections. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.channels.clear();
    this.keysByChannel.clear();
    this.subscribers.forEach((subscriber, node) => {
      subscriber?.removeAllListeners('message');
      subscriber?.disconnect();
      this.subscribers[node] = undefined;
    });
  }

  private subscribe(key: string): Promise<unknown> {
    if (this.closed) return Promise.resolve();
    return askEveryNode(
      this.clients.length,
      (node) => {
        const channel = wakeChannel(this.clients[node], key);
        this.keysByChannel.set(channel, key);
        const subscribed = this.subscriber(node).subscribe(channel);
        if (this.reachable(node)) return subscribed;
        subscribed.catch(() => undefined);
        return Promise.resolve(0);
      },
      this.timeoutMs,
    );
  }

  private unlisten(key: string, onWake: (releasedBy: string) => void): void {
    const channel = this.channels.get(key);
    if (!channel?.listeners.delete(onWake) || channel.listeners.size > 0)
      return;
    this.channels.delete(key);
    this.subscribers.forEach((subscriber, node) => {
      const name = wakeChannel(this.clients[node], key);
      this.keysByChannel.delete(name);
      // Sent after the SUBSCRIBE on the same connection, so it lands after it.
      subscriber?.unsubscribe(name).catch(() => undefined);
    });
  }

  private subscriber(node: number): Redis {
    let subscriber = this.subscribers[node];
    if (!subscriber) {
      // Queues the SUBSCRIBE until connected, whatever the client's setting.
      subscriber = this.clients[node].duplicate({ enableOfflineQueue: true });
      // Connection trouble shows in the lock calls on the node's own client.
      subscriber.on('error', () => undefined);
      subscriber.on('message', (name: string, releasedBy: string) =>
        this.deliver(name, releasedBy),
      );
      this.subscribers[node] = subscriber;
    }
    return subscriber;
  }

  private deliver(name: string, releasedBy: string): void {
    const key = this.keysByChannel.get(name);
    const channel = key === undefined ? undefined : this.channels.get(key);
    if (!channel) return;
    for (const onWake of channel.listeners) onWake(releasedBy);
  }
}
