/** The kind of store a probe looked at. */
export type LockStoreKind =
  'redis' | 'redis-cluster' | 'quorum' | 'memory' | 'custom';

/** How one Redis server answered a probe. */
export interface LockNodeHealth {
  /** `host:port` (or the socket path, or the Sentinel master's name). */
  readonly address: string;
  /** It answered `PING` within the time limit. */
  readonly up: boolean;
  /** Round trip of the `PING`, in ms (0.1 ms steps); set when up. */
  readonly latencyMs?: number;
  /**
   * Every lock script is in this server's script cache after the probe:
   * scripts found missing (after a restart, a failover, a `SCRIPT FLUSH`, or
   * simply not used yet) are loaded by the probe. Undefined when the server
   * did not tell (it is down, or the Redis user may not run `SCRIPT`).
   */
  readonly scriptsLoaded?: boolean;
  /** How many lock scripts were missing from the cache when the probe looked. */
  readonly scriptsMissing?: number;
  /**
   * Quorum only: whether its votes count now. A node seen to restart sits
   * out the longest lease first (see `QuorumLockBackend`).
   */
  readonly votes?: boolean;
  /** Why it is down, or why the scripts could not be checked. */
  readonly message?: string;
}

/**
 * What `LockBackend.probe` reports: whether the store can serve locks
 * right now, and how each of its servers answered.
 */
export interface LockBackendHealth {
  /**
   * The store can serve locks: its server answered; on a Cluster, every
   * master; on a quorum, a majority of voting nodes.
   */
  readonly up: boolean;
  readonly store: LockStoreKind;
  /**
   * The round trip a lock call waits for, in ms: the server's; on a
   * Cluster, the slowest master's; on a quorum, that of the node whose
   * answer completed the majority. Unset when down.
   */
  readonly latencyMs?: number;
  /**
   * Every lock script is cached on every server that answered (see
   * {@link LockNodeHealth.scriptsLoaded}); undefined when that cannot be told.
   */
  readonly scriptsLoaded?: boolean;
  /** Quorum only: how many voting nodes make a majority. */
  readonly quorum?: number;
  /** Each server probed, in the backend's order (masters, on a Cluster). */
  readonly nodes: readonly LockNodeHealth[];
  /** Why it is down. */
  readonly message?: string;
}

/**
 * All nodes' scripts loaded: false when any says false, undefined when any
 * could not tell (and none said false), else true.
 */
export function allScriptsLoaded(
  nodes: readonly LockNodeHealth[],
): boolean | undefined {
  const answered = nodes.filter((node) => node.up);
  if (answered.some((node) => node.scriptsLoaded === false)) return false;
  if (answered.length === 0) return undefined;
  if (answered.some((node) => node.scriptsLoaded === undefined))
    return undefined;
  return true;
}
