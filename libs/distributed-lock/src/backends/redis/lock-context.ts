import type { Cluster, Redis } from 'ioredis';
import { Acquisitions } from './acquisitions.js';
import { Grants } from './grants.js';
import { LocalHolds } from './local-holds.js';
import { LocalPasses } from './local-passes.js';
import { LockCommands } from './lock-commands.js';
import { QueueChecks } from './queue-checks.js';
import type { RedisLockSettings } from './redis-lock-options.js';
import { Releases } from './releases.js';
import { HolderSessions } from './holder-sessions.js';
import { RedisSessions } from './redis-sessions.js';
import { TimedMemory } from '../timed-memory.js';
import { TrackedCalls } from './tracked-calls.js';
import { WaiterRegistry } from './waiter-registry.js';
import type { Waiter } from './waiter.js';
import { Waiting } from './waiting.js';
import { ShardWakeListener } from './shard-wake-listener.js';
import { WakeListener } from './wake-listener.js';

function listenerCount(emitter: {
  eventNames(): (string | symbol)[];
  listenerCount(event: string | symbol): number;
}): number {
  return emitter
    .eventNames()
    .reduce((sum, event) => sum + emitter.listenerCount(event), 0);
}

/** After finding a key busy, acquisitions of it go straight to the queueing script for this long. */
const contendedMemoryMs = 1000;

/**
 * What the rooms of one {@link RedisLockBackend} share: the connection and its
 * scripts, the bookkeeping of waiters and holds, and each other. Every room
 * is one job (taking, waiting, granting, releasing, passing on in memory,
 * checking on the queue) and reaches the others through this context, at
 * call time.
 */
export class LockContext {
  /** Every Redis call, bounded, and the work under way that close() waits for. */
  readonly calls: TrackedCalls;
  readonly commands: LockCommands;
  /**
   * Hears the hand-offs meant for this process: pops its wake list, or on
   * Redis Cluster listens on the wake channels of the keys it waits for.
   */
  readonly listener: WakeListener | ShardWakeListener;
  readonly waiters: WaiterRegistry;
  /** Contended locks held here, by key. */
  readonly holds = new LocalHolds();
  /** Keys found busy lately, until when that counts (ms since epoch). */
  readonly contended = new TimedMemory(contendedMemoryMs);

  readonly acquisitions: Acquisitions;
  readonly waiting: Waiting;
  readonly grants: Grants;
  readonly releases: Releases;
  readonly passes: LocalPasses;
  readonly checks: QueueChecks;
  /** This process's sessions. */
  readonly sessions: RedisSessions;
  /** What is known of the sessions of the locks' holders. */
  readonly holderSessions: HolderSessions;

  closed = false;

  constructor(
    readonly client: Redis | Cluster,
    readonly settings: RedisLockSettings,
  ) {
    this.acquisitions = new Acquisitions(this);
    this.waiting = new Waiting(this);
    this.grants = new Grants(this);
    this.releases = new Releases(this);
    this.passes = new LocalPasses(this);
    this.checks = new QueueChecks(this);
    this.sessions = new RedisSessions(this, settings.freeOnDisconnect);
    this.holderSessions = new HolderSessions(this);
    this.calls = new TrackedCalls(settings.commandTimeoutMs);
    this.waiters = new WaiterRegistry((key) => {
      this.checks.stop(key);
      this.listener.idle(key);
    });
    const onHandoff = (token: string, fencingToken: number, key: string) =>
      this.grants.deliver(token, fencingToken, key);
    this.listener = client.isCluster
      ? new ShardWakeListener({
          client: client as Cluster,
          onHandoff,
          inUse: (key) => this.waiters.hasKey(key),
        })
      : new WakeListener({
          client: client as Redis,
          keyPrefix: settings.keyPrefix,
          commandTimeoutMs: settings.commandTimeoutMs,
          needed: () =>
            this.waiters.size > 0 || this.waiters.acquiring.size > 0,
          onHandoff,
        });
    this.commands = new LockCommands(
      client,
      settings,
      this.listener.scriptName,
    );
  }

  /**
   * How much bookkeeping is kept, by name: all zero on an idle backend
   * (`contended` and `claimed` forget on their own). For leak checks.
   */
  bookkeeping(): Record<string, number> {
    const { waiters } = this;
    return {
      waiters: waiters.size,
      waitedKeys: waiters.keyCount,
      acquiring: waiters.acquiring.size,
      earlyHandoffs: waiters.earlyHandoffs.size,
      claimed: waiters.claimed.size,
      checks: this.checks.size,
      contended: this.contended.size,
      holds: this.holds.size,
      callsUnderWay: this.calls.sizes.underWay,
      callDeadlines: this.calls.sizes.deadlines,
      clientListeners: listenerCount(this.client),
      ...this.listener.bookkeeping(),
    };
  }

  /**
   * Resolves once a hand-off of `key` to this process would be heard (on
   * Redis Cluster, once its wake channel is subscribed); undefined when it
   * would be already, which costs the contended path no promise.
   */
  wakeupsFor(key: string): Promise<unknown> | undefined {
    const ready = this.listener.prepare(key);
    return ready && this.calls.call(ready, 'subscribe');
  }

  /** An acquisition of `key` ended without leaving a waiter: its wake-ups may go. */
  doneWaiting(key: string): void {
    if (!this.waiters.hasKey(key)) this.listener.idle(key);
  }

  /** The lease a lock handed to `waiter` gets, until the waiter sets its own. */
  handoffLease(waiter: Waiter): number {
    return Math.min(waiter.leaseMs, this.settings.handoffLeaseMs);
  }

  /** Whether `key` should skip the bare `SET`: someone here waits for it, or it was busy lately. */
  isContended(key: string): boolean {
    // Nobody here waits and no key was busy lately: the common case, answered
    // without hashing the key (a string built for this acquisition).
    if (this.waiters.keyCount === 0 && this.contended.size === 0) return false;
    return this.waiters.hasKey(key) || this.contended.has(key);
  }
}
