import type { Redis } from 'ioredis';
import { monotonicNow } from '../../lease/lease-clock.js';
import { answerWithin } from '../answer-deadline.js';

/** Reads of `run_id` retried on one connection before waiting for the next. */
const maxReadRetries = 5;

/** What the guard knows about one node. */
interface NodeWatch {
  /** The server's `run_id` last read; undefined before the first read. */
  runId?: string;
  /**
   * The connection dropped after a `run_id` was known and the new one has
   * not been read yet: the node may have restarted, so it does not vote.
   */
  checking: boolean;
  /** Monotonic ms until which the node does not vote (restart seen). */
  mutedUntil: number;
  /** The connection closed and has not been ready since. */
  down: boolean;
  /**
   * The connection was ready and dropped before any `run_id` was read: a
   * restart then cannot be told from the next read, so that read mutes it.
   */
  unread: boolean;
  /** The connection has been ready at least once. */
  wasReady: boolean;
  /** Numbers the reads, so only the latest one decides. */
  reads: number;
  /** Reads that failed since the connection became ready. */
  failures: number;
  retry?: NodeJS.Timeout;
  readonly onReady: () => void;
  readonly onClose: () => void;
}

/**
 * The delayed restart rule of the Redis distlock document: a node that
 * restarted without persistence forgot the locks it granted, so for as long
 * as those leases may last it must not grant them again to someone else as
 * part of a majority.
 *
 * Each node's `run_id` (INFO server) is read when its client connects. One
 * that changed means the server restarted: the node's votes are not counted
 * for the longest lease in use after that was seen. Between a reconnection
 * and the answer of that read the node does not vote either, so no answer of
 * a restarted server is counted before the restart is known.
 *
 * Only restarts this process witnesses are caught: a node that restarted
 * before this process first connected to it looks new, not restarted.
 */
export class RestartGuard {
  private readonly watches: NodeWatch[];
  private longestLeaseMs: number;
  private closed = false;

  constructor(
    private readonly clients: readonly Redis[],
    maxLeaseMs: number,
    private readonly timeoutMs: number,
  ) {
    this.longestLeaseMs = maxLeaseMs;
    this.watches = clients.map((client, node) => {
      const watch: NodeWatch = {
        checking: false,
        mutedUntil: 0,
        down: false,
        reads: 0,
        failures: 0,
        unread: false,
        wasReady: client.status === 'ready',
        onReady: () => {
          watch.wasReady = true;
          watch.down = false;
          watch.failures = 0;
          this.readRunId(node);
        },
        onClose: () => {
          watch.down = true;
          if (watch.runId !== undefined) watch.checking = true;
          else if (watch.wasReady) {
            watch.checking = true;
            watch.unread = true;
          }
        },
      };
      client.on('ready', watch.onReady);
      client.on('close', watch.onClose);
      return watch;
    });
    clients.forEach((client, node) => {
      if (client.status === 'ready') this.readRunId(node);
    });
  }

  /** Notes a lease this process sets: a restart mutes a node at least that long. */
  noteLease(leaseMs: number): void {
    if (leaseMs > this.longestLeaseMs) this.longestLeaseMs = leaseMs;
  }

  /** Whether node `node`'s answers count towards a majority right now. */
  counts(node: number): boolean {
    const watch = this.watches[node];
    return !watch.checking && monotonicNow() >= watch.mutedUntil;
  }

  /**
   * Whether node `node`'s connection is up, or still being opened for the
   * first time: a lock round skips a node whose connection dropped, rather
   * than queue a vote that would not count and wait for it.
   */
  reachable(node: number): boolean {
    return !this.watches[node].down;
  }

  /** The nodes whose votes do not count right now. */
  mutedNodes(): number[] {
    return this.watches.flatMap((_, node) => (this.counts(node) ? [] : [node]));
  }

  /** Removes the listeners and timers. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.watches.forEach((watch, node) => {
      clearTimeout(watch.retry);
      this.clients[node].off('ready', watch.onReady);
      this.clients[node].off('close', watch.onClose);
    });
  }

  private readRunId(node: number): void {
    const watch = this.watches[node];
    const client = this.clients[node];
    clearTimeout(watch.retry);
    watch.retry = undefined;
    const read = ++watch.reads;
    answerWithin(client.info('server'), this.timeoutMs, { unref: true })
      .then((info) => {
        if (this.closed || read !== watch.reads) return;
        const runId = /^run_id:(\w+)/m.exec(info)?.[1];
        if (runId === undefined) throw new Error('INFO server has no run_id');
        if (
          (watch.runId !== undefined && watch.runId !== runId) ||
          watch.unread
        ) {
          watch.mutedUntil = monotonicNow() + this.longestLeaseMs;
        }
        watch.runId = runId;
        watch.unread = false;
        watch.checking = false;
      })
      .catch(() => {
        // Still connected: ask again a few times; otherwise the next 'ready'
        // will. A node that never answers stays out of the vote if it was
        // checking (the safe side).
        if (this.closed || read !== watch.reads) return;
        if (client.status !== 'ready' || ++watch.failures > maxReadRetries)
          return;
        watch.retry = setTimeout(() => this.readRunId(node), this.timeoutMs);
        watch.retry.unref();
      });
  }
}
