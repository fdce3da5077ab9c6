import type { ExecutionContext } from '@nestjs/common';
import type {
  Cluster,
  ClusterNode,
  ClusterOptions,
  Redis,
  RedisOptions,
} from 'ioredis';
import type { LockBackend } from '../backends/lock-backend.js';
import type { LockError } from '../errors/lock-errors.js';
import type {
  LockMetricsOptions,
  LockTracingOptions,
} from '../telemetry/telemetry-options.js';

/** HTTP statuses (and RPC error statuses) the interceptor answers lock failures with. */
export interface LockErrorStatuses {
  /** Still busy after `waitTime` (`LockNotAcquiredError`). Default 409. */
  readonly notAcquired?: number;
  /** The key could not be built from the request (`LockKeyError`). Default 400. */
  readonly invalidKey?: number;
  /** Redis unreachable or too slow (`LockBackendError`). Default 503. */
  readonly backendUnavailable?: number;
  /** A reentrant acquisition found its outer lock lost (`LockLostError`). Default 409. */
  readonly lost?: number;
}

/** Options of `DistributedLockModule.forRoot` / `forRootAsync`. */
export interface DistributedLockModuleOptions {
  /**
   * Where locks live: an existing ioredis client (used as is, never closed by
   * the module), or a URL (`redis://`, `rediss://` for TLS, with
   * `user:password@` for ACL users) or ioredis options for a connection the
   * module opens and closes on shutdown. Default `redis://127.0.0.1:6379`.
   */
  readonly redis?: Redis | string | (RedisOptions & { readonly url?: string });
  /**
   * Keep locks on a Redis Cluster instead: its startup nodes (the module
   * opens the connection and closes it on shutdown), or an ioredis `Cluster`
   * (used as is, never closed by the module). Every lock's keys share one
   * slot; multi-key locks may span slots. Default: unset.
   */
  readonly cluster?: Cluster | readonly ClusterNode[];
  /** ioredis options for a Cluster connection the module opens from `cluster` nodes. Default: none. */
  readonly clusterOptions?: ClusterOptions;
  /**
   * Grant a lock only once this many replicas confirmed it (Redis `WAIT`)
   * within `timeoutMs` (default 1000 ms); otherwise it is released and the
   * acquisition fails with `LockBackendError` (503). Narrows the window in
   * which a failover loses a granted lock; does not close it. One Redis with
   * replicas (standalone or Sentinel) only. Default: unset.
   */
  readonly replicaAcks?: {
    readonly replicas: number;
    readonly timeoutMs?: number;
  };
  /**
   * A lock store to use instead of `redis`, e.g. `new MemoryLockBackend()` in
   * unit tests. The module closes it on shutdown.
   */
  readonly backend?: LockBackend;
  /**
   * Redlock quorum over these independent masters; 3 or 5. A lock is held
   * when a majority of them granted it (`QuorumLockBackend`). Each node is an
   * ioredis client (used as is, never closed by the module), or a URL or
   * ioredis options for a connection the module opens and closes on
   * shutdown. Not together with `backend`, `redis` or `cluster`.
   */
  readonly nodes?: ReadonlyArray<string | RedisOptions | Redis>;
  /** Prefix of every lock key in Redis. Default `'lock:'`. */
  readonly keyPrefix?: string;
  /**
   * Default lease in ms. When set, locks expire after it and are not renewed,
   * also when their holder dies: a fixed bound instead of crash recovery.
   * Default: unset, so each lock is kept for as long as its holder runs,
   * bound to the process session (see `sessionTtl`).
   */
  readonly leaseTime?: number;
  /**
   * TTL of the process session in ms: one record per process, renewed every
   * third of it with one command however many locks are held. Every lock
   * taken without a `leaseTime` is bound to it, so a process that dies, is
   * frozen or is cut off loses all its locks, to the next waiters, within
   * this long; the holder is told first. `false` turns sessions off: each
   * such lock renews its own lease (`watchdogLeaseTime`). At least 300.
   * Default 5000 ms.
   *
   * Semaphore and read-write lock holds are not bound to the session: each
   * hold without a `leaseTime` renews a lease of its own of `sessionTtl`,
   * every third of it, so a dead process's permits and read or write holds
   * come back within that long. With `sessionTtl: false` that lease is
   * 5000 ms (`watchdogLeaseTime` applies to locks only).
   */
  readonly sessionTtl?: number | false;
  /**
   * Free a process's locks as soon as Redis sees its connection close (a
   * killed process's connection closes at once: its locks go in a fraction
   * of a second, not `sessionTtl`). Waiters then look at the holder's
   * connection every 200 ms (`CLIENT LIST ID`, which the Redis user must be
   * allowed). In exchange, a process counts every lock it holds lost the
   * moment its own connection drops, even for a blip; and a holder whose
   * connection Redis closes while it is paused or cut off (`CLIENT KILL`, a
   * `timeout` setting) can lose its locks before it hears of it, so fence
   * what matters. Needs a direct connection to one Redis (standalone or
   * Sentinel; no proxy, where a connection is not a process). Default false.
   */
  readonly freeOnDisconnect?: boolean;
  /**
   * With sessions off (or on a custom backend without them), the lease a
   * lock without `leaseTime` keeps alive, renewed every third of it.
   * Default 30000 ms.
   */
  readonly watchdogLeaseTime?: number;
  /** Default time to wait for a busy lock, in ms (0 tries once). Default 5000 ms. */
  readonly waitTime?: number;
  /** Longest lock key (without prefix), in UTF-8 bytes. Default 512. */
  readonly maxKeyLength?: number;
  /** Longest time one Redis call may take before failing with `LockBackendError`. Default 2000 ms. */
  readonly commandTimeout?: number;
  /**
   * Lease a lock gets when handed to a queued waiter, before the waiter applies
   * its own: bounds how long a waiter that died in the queue stalls the others.
   * Default 3000 ms.
   */
  readonly handoffLeaseTime?: number;
  /**
   * Under contention, how many times in a row a released lock may go to a
   * waiter in the releasing process ahead of an older waiter in another one
   * (lock cohorting). Such a hand-off needs no wake-up through Redis, which is
   * most of what a hand-off between processes costs; a lock that came from
   * the queue is even passed on in memory, with no round trip before the new
   * holder runs (Redis is told afterwards). The oldest waiter is
   * passed over at most this often, and only within `localHandoffWindow`, so
   * nobody starves; 0 keeps the queue strictly first come, first served.
   * Default 8.
   */
  readonly localHandoffs?: number;
  /**
   * How long, in ms from the first pass, the oldest waiter may be passed over
   * by local hand-offs: short holds pass it several times in that window, holds
   * longer than it at most once. Default 1 ms.
   */
  readonly localHandoffWindow?: number;
  /**
   * Send the commands issued in one turn of the event loop in one socket
   * write per 12 commands, on the connections the module opens (a client
   * passed in is left as it is). With many concurrent lock calls this saves
   * most of the CPU that a write per command costs Node and Redis, and Redis
   * starts on a batch while Node builds the next. A command on an idle
   * connection (no earlier command awaits its reply) is written at once, as
   * before: only commands issued while others are in flight wait for the
   * turn's end. These connections also keep each command awaiting its
   * reply in a queue entry of the library's own class rather than ioredis's
   * object literal, which V8 may move to the old generation under load, where
   * finished commands then linger until a full GC. `false` writes each
   * command on its own and keeps ioredis's entries, as ioredis does.
   * Default true.
   */
  readonly coalesceWrites?: boolean;
  /**
   * Prometheus metrics through prom-client 15 (an optional peer: install it).
   * `true` registers them in prom-client's global registry (the one
   * `@willsoto/nestjs-prometheus` serves by default, so they appear on its
   * `/metrics` as they are); an object picks the registry, the name prefix,
   * the buckets and the bound on lock names. Labels are lock names (key
   * templates), never keys. Default false.
   */
  readonly metrics?: boolean | LockMetricsOptions;
  /**
   * OpenTelemetry spans (`lock.acquire`, `lock.hold`) through
   * `@opentelemetry/api` 1.x. `'auto'` makes them when that package is
   * installed (they go wherever the application's SDK sends its spans; until
   * an SDK registers a tracer provider, none are made and nothing is kept for
   * them); `true` requires it; `false` makes none. Default `'auto'`.
   */
  readonly tracing?: boolean | 'auto' | LockTracingOptions;
  /** Status codes for lock failures answered by the interceptor. */
  readonly statuses?: LockErrorStatuses;
  /**
   * Seconds for the `Retry-After` header on busy (409) and unavailable (503)
   * answers; `'lease'` uses the holder's remaining lease (rounded up, at least
   * 1), a good hint only for explicit leases; `false` sends none. Default 1.
   */
  readonly retryAfter?: number | 'lease' | false;
  /**
   * Full control over failure responses: return the error to throw instead
   * (e.g. an `HttpException`), or undefined to use the default mapping.
   */
  readonly mapError?: (error: LockError, context: ExecutionContext) => unknown;
}

/** Extra options of `forRoot` / `forRootAsync`. */
export interface DistributedLockModuleExtras {
  /** Register the module globally, so feature modules need not import it. Default false. */
  readonly isGlobal?: boolean;
}
