import type { Redis } from 'ioredis';

/** Options of {@link QuorumLockBackend}. */
export interface QuorumLockBackendOptions {
  /**
   * One client per independent Redis master (not replicas of each other, not
   * one Cluster): an odd number, 3 or 5 in practice. A lock is held when a
   * majority, `floor(N / 2) + 1`, of them granted it.
   */
  readonly nodes: readonly Redis[];
  /**
   * Whether {@link QuorumLockBackend.close} closes the clients: true or false
   * for all of them, or one flag per node. Default false.
   */
  readonly ownsClients?: boolean | readonly boolean[];
  /**
   * Longest time one node may take to answer one command, in ms, before the
   * node counts as not answering this time. Default 200 ms.
   *
   * Redlock wants it small against the lease: an acquisition waits for a
   * node at most this long, and that time is taken off the lease it grants.
   * 200 ms is under 1% of the default 30 s watchdog lease, yet far above the
   * sub-millisecond round trip of a healthy node on a LAN, so a garbage
   * collection pause or a busy Redis does not count as an outage.
   */
  readonly nodeTimeoutMs?: number;
  /**
   * Base of the random delay before trying again after an attempt that could
   * not reach a majority of the nodes, or whose majority came too late for a
   * valid lease; each delay is drawn from `[0.5, 1.5)` times it, so competing
   * processes fall out of step. Default 30 ms: a few round trips, short
   * against any lease. (A lock that is held, or a split vote, is waited out
   * without it: waiters are woken by the release or the give-back.)
   */
  readonly retryDelayMs?: number;
  /**
   * How long a freed lock is kept for the earliest waiter registered on a
   * node before the next one may take it, in ms: the bound on how long a
   * waiter that died stalls the others. A live waiter is woken at the release
   * within milliseconds and renews its place with its next attempt, far
   * inside it. Default 1000 ms.
   */
  readonly waiterGraceMs?: number;
  /**
   * The longest lease any process sets on these nodes, in ms. A node seen to
   * restart (its `run_id` changed) lost its locks, so its grants do not count
   * until this long after the restart was seen, by when every lease it had
   * granted before has run out anyway. The longest lease this backend itself
   * sets counts too, if longer. Default 30000 ms, the module's watchdog lease
   * (its default `watchdogLeaseTime`).
   *
   * It is also the lease of a lock bound to a process session
   * (`sessions.holdLeaseMs`), renewed every third of it, so restarts stay
   * covered; a session TTL above it mutes restarted nodes for the TTL.
   */
  readonly maxLeaseMs?: number;
  /**
   * The prefix of the lock keys, as LockService builds them: session keys
   * are `<keyPrefix>session:{<id>}` beside them, where the nodes' scripts
   * look up a lock holder's session. Default 'lock:'.
   */
  readonly keyPrefix?: string;
}

/** {@link QuorumLockBackendOptions} with every default applied and checked. */
export interface ResolvedQuorumOptions {
  readonly nodes: readonly Redis[];
  readonly owns: readonly boolean[];
  readonly quorum: number;
  readonly nodeTimeoutMs: number;
  readonly retryDelayMs: number;
  readonly waiterGraceMs: number;
  readonly maxLeaseMs: number;
  readonly keyPrefix: string;
}

/** Defaults of {@link QuorumLockBackendOptions}. */
export const quorumDefaults = {
  nodeTimeoutMs: 200,
  retryDelayMs: 30,
  waiterGraceMs: 1000,
  maxLeaseMs: 30_000,
  keyPrefix: 'lock:',
} as const;

/** The number of nodes that make a majority of `count`. */
export function majorityOf(count: number): number {
  return Math.floor(count / 2) + 1;
}

/**
 * Applies the defaults and rejects nonsense up front.
 *
 * @throws RangeError for an even or too small node count, a bad flag list or
 *   a time that is not a positive number
 */
export function resolveQuorumOptions(
  options: QuorumLockBackendOptions,
): ResolvedQuorumOptions {
  const nodes = [...(options.nodes ?? [])];
  if (nodes.length < 3 || nodes.length % 2 === 0) {
    throw new RangeError(
      `QuorumLockBackend needs an odd number of at least 3 nodes (3 or 5), got ${nodes.length}`,
    );
  }
  if (new Set(nodes).size !== nodes.length) {
    throw new RangeError(
      'QuorumLockBackend: every node needs a client of its own',
    );
  }
  const flags = options.ownsClients ?? false;
  const owns = typeof flags === 'boolean' ? nodes.map(() => flags) : [...flags];
  if (owns.length !== nodes.length) {
    throw new RangeError(
      `QuorumLockBackend: ownsClients has ${owns.length} flags for ${nodes.length} nodes`,
    );
  }
  const resolved: ResolvedQuorumOptions = {
    nodes,
    owns,
    quorum: majorityOf(nodes.length),
    nodeTimeoutMs: options.nodeTimeoutMs ?? quorumDefaults.nodeTimeoutMs,
    retryDelayMs: options.retryDelayMs ?? quorumDefaults.retryDelayMs,
    waiterGraceMs: options.waiterGraceMs ?? quorumDefaults.waiterGraceMs,
    maxLeaseMs: options.maxLeaseMs ?? quorumDefaults.maxLeaseMs,
    keyPrefix: options.keyPrefix ?? quorumDefaults.keyPrefix,
  };
  if (typeof resolved.keyPrefix !== 'string') {
    throw new RangeError(
      `QuorumLockBackend: keyPrefix must be a string, got ${String(resolved.keyPrefix)}`,
    );
  }
  for (const name of [
    'nodeTimeoutMs',
    'retryDelayMs',
    'waiterGraceMs',
    'maxLeaseMs',
  ] as const) {
    const value = resolved[name];
    if (!(value > 0) || !Number.isFinite(value)) {
      throw new RangeError(
        `QuorumLockBackend: ${name} must be a positive number of ms, got ${value}`,
      );
    }
  }
  return resolved;
}
