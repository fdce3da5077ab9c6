import type { Cluster, Redis } from 'ioredis';

/** Options of {@link RedisLockBackend}. */
export interface RedisLockBackendOptions {
  /**
   * The connection that runs the lock scripts: one Redis server (standalone
   * or behind Sentinel), or a Redis Cluster.
   */
  readonly client: Redis | Cluster;
  /** Close `client` in {@link RedisLockBackend.close}. Default false. */
  readonly ownsClient?: boolean;
  /** Longest time one Redis call may take before it fails with `LockBackendError`. Default 2000 ms. */
  readonly commandTimeoutMs?: number;
  /**
   * Lease given to a queued waiter when the lock is handed to it, before its
   * own lease is applied. Bounds how long a waiter that died in the queue can
   * hold up the others. Default 3000 ms.
   */
  readonly handoffLeaseMs?: number;
  /**
   * How many times in a row a released lock may go to a waiter in this
   * process ahead of an older waiter elsewhere (see the module option
   * `localHandoffs`). Default 8; 0 is strictly first come, first served.
   */
  readonly localHandoffs?: number;
  /** How long from the first pass the oldest waiter may be passed over, in ms. Default 1. */
  readonly localHandoffWindowMs?: number;
  /** Prefix of this backend's own bookkeeping keys (the wake list). Default `'lock:'`. */
  readonly keyPrefix?: string;
  /**
   * Grant a lock only once `replicas` replicas confirmed it (`WAIT`) within
   * `timeoutMs` (default 1000); otherwise it is released and the acquisition
   * fails with `LockBackendError`. Narrows, does not close, the window in
   * which a failover loses a granted lock. One Redis server with replicas
   * (standalone or behind Sentinel) only. Default: unset, no waiting.
   */
  readonly replicaAcks?: ReplicaAcks;
  /**
   * Free a holder's session-bound locks as soon as Redis sees the
   * connection that renews its session close (a killed process's closes at
   * once), instead of when its session's TTL runs out: waiters look at the
   * holder's connection every 200 ms (`CLIENT LIST ID`, which the Redis user
   * must be allowed). In exchange, this process counts its session lapsed,
   * and every lock bound to it lost, the moment its own connection drops.
   * Needs a direct connection (no proxy in between, where a connection is
   * not a process). One Redis server (standalone or Sentinel). Default false.
   */
  readonly freeOnDisconnect?: boolean;
}

/**
 * See {@link RedisLockBackendOptions.replicaAcks}.
 *
 * @inline
 */
export interface ReplicaAcks {
  /** How many replicas must confirm a grant (`WAIT`). */
  readonly replicas: number;
  /** How long to wait for them, in ms. Default 1000. */
  readonly timeoutMs?: number;
}

/** {@link RedisLockBackendOptions} with every default applied. */
export interface RedisLockSettings {
  readonly commandTimeoutMs: number;
  readonly handoffLeaseMs: number;
  readonly localHandoffs: number;
  readonly localHandoffWindowMs: number;
  readonly keyPrefix: string;
  readonly freeOnDisconnect: boolean;
}

const defaults: RedisLockSettings = {
  commandTimeoutMs: 2000,
  handoffLeaseMs: 3000,
  localHandoffs: 8,
  localHandoffWindowMs: 1,
  keyPrefix: 'lock:',
  freeOnDisconnect: false,
};

export function resolveRedisLockSettings(
  options: RedisLockBackendOptions,
): RedisLockSettings {
  return {
    commandTimeoutMs: options.commandTimeoutMs ?? defaults.commandTimeoutMs,
    handoffLeaseMs: options.handoffLeaseMs ?? defaults.handoffLeaseMs,
    localHandoffs: options.localHandoffs ?? defaults.localHandoffs,
    localHandoffWindowMs:
      options.localHandoffWindowMs ?? defaults.localHandoffWindowMs,
    keyPrefix: options.keyPrefix ?? defaults.keyPrefix,
    freeOnDisconnect: options.freeOnDisconnect ?? defaults.freeOnDisconnect,
  };
}
