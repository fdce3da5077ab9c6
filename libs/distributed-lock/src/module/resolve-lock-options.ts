import type {
  DistributedLockModuleOptions,
  LockErrorStatuses,
} from './distributed-lock.options.js';

/** Module options with every default applied. */
export interface ResolvedLockOptions extends Required<
  Pick<
    DistributedLockModuleOptions,
    | 'keyPrefix'
    | 'watchdogLeaseTime'
    | 'waitTime'
    | 'maxKeyLength'
    | 'commandTimeout'
    | 'handoffLeaseTime'
    | 'localHandoffs'
    | 'localHandoffWindow'
    | 'coalesceWrites'
    | 'retryAfter'
  >
> {
  readonly leaseTime?: number;
  /** Undefined when sessions are off. */
  readonly sessionTtl?: number;
  readonly statuses: Required<LockErrorStatuses>;
  readonly mapError?: DistributedLockModuleOptions['mapError'];
}

export const lockOptionDefaults = {
  redisUrl: 'redis://127.0.0.1:6379',
  keyPrefix: 'lock:',
  sessionTtl: 5_000,
  watchdogLeaseTime: 30_000,
  waitTime: 5_000,
  maxKeyLength: 512,
  commandTimeout: 2_000,
  handoffLeaseTime: 3_000,
  localHandoffs: 8,
  localHandoffWindow: 1,
  coalesceWrites: true,
  retryAfter: 1,
  statuses: {
    notAcquired: 409,
    invalidKey: 400,
    backendUnavailable: 503,
    lost: 409,
  },
} as const;

/** Applies defaults and rejects nonsense at startup rather than at the first request. */
export function resolveLockOptions(
  options: DistributedLockModuleOptions,
): ResolvedLockOptions {
  const resolved: ResolvedLockOptions = {
    keyPrefix: options.keyPrefix ?? lockOptionDefaults.keyPrefix,
    leaseTime: options.leaseTime,
    sessionTtl:
      options.sessionTtl === false
        ? undefined
        : (options.sessionTtl ?? lockOptionDefaults.sessionTtl),
    watchdogLeaseTime:
      options.watchdogLeaseTime ?? lockOptionDefaults.watchdogLeaseTime,
    waitTime: options.waitTime ?? lockOptionDefaults.waitTime,
    maxKeyLength: options.maxKeyLength ?? lockOptionDefaults.maxKeyLength,
    commandTimeout: options.commandTimeout ?? lockOptionDefaults.commandTimeout,
    handoffLeaseTime:
      options.handoffLeaseTime ?? lockOptionDefaults.handoffLeaseTime,
    localHandoffs: options.localHandoffs ?? lockOptionDefaults.localHandoffs,
    localHandoffWindow:
      options.localHandoffWindow ?? lockOptionDefaults.localHandoffWindow,
    coalesceWrites: options.coalesceWrites ?? lockOptionDefaults.coalesceWrites,
    retryAfter: options.retryAfter ?? lockOptionDefaults.retryAfter,
    statuses: { ...lockOptionDefaults.statuses, ...options.statuses },
    mapError: options.mapError,
  };
  const positive = [
    'watchdogLeaseTime',
    'maxKeyLength',
    'commandTimeout',
    'handoffLeaseTime',
  ] as const;
  for (const name of positive) {
    if (!(resolved[name] > 0) || !Number.isFinite(resolved[name])) {
      throw new RangeError(
        `DistributedLockModule: ${name} must be a positive number, got ${resolved[name]}`,
      );
    }
  }
  if (
    !Number.isSafeInteger(resolved.localHandoffs) ||
    resolved.localHandoffs < 0
  ) {
    throw new RangeError(
      `DistributedLockModule: localHandoffs must be a non-negative integer, got ${resolved.localHandoffs}`,
    );
  }
  if (
    !(resolved.localHandoffWindow >= 0) ||
    !Number.isFinite(resolved.localHandoffWindow)
  ) {
    throw new RangeError(
      `DistributedLockModule: localHandoffWindow must be >= 0, got ${resolved.localHandoffWindow}`,
    );
  }
  if (typeof resolved.coalesceWrites !== 'boolean') {
    throw new TypeError(
      `DistributedLockModule: coalesceWrites must be true or false, got ${String(resolved.coalesceWrites)}`,
    );
  }
  if (!(resolved.waitTime >= 0) || !Number.isFinite(resolved.waitTime)) {
    throw new RangeError(
      `DistributedLockModule: waitTime must be >= 0, got ${resolved.waitTime}`,
    );
  }
  if (
    resolved.leaseTime !== undefined &&
    (!(resolved.leaseTime > 0) || !Number.isFinite(resolved.leaseTime))
  ) {
    throw new RangeError(
      `DistributedLockModule: leaseTime must be a positive number, got ${resolved.leaseTime}`,
    );
  }
  if (
    resolved.sessionTtl !== undefined &&
    (!(resolved.sessionTtl >= 300) || !Number.isFinite(resolved.sessionTtl))
  ) {
    throw new RangeError(
      `DistributedLockModule: sessionTtl must be false or at least 300 ms, got ${resolved.sessionTtl}`,
    );
  }
  if (options.freeOnDisconnect) {
    const other =
      otherStoreThanOneRedis(options) ||
      (options.sessionTtl === false ? 'sessionTtl: false' : '');
    if (other) {
      throw new RangeError(
        `DistributedLockModule: freeOnDisconnect needs one Redis (redis) and sessions, not ${other}`,
      );
    }
  }
  if (options.replicaAcks !== undefined) {
    const other = otherStoreThanOneRedis(options);
    if (other) {
      throw new RangeError(
        `DistributedLockModule: replicaAcks needs one Redis with replicas (redis), not ${other}`,
      );
    }
  }
  if (options.cluster !== undefined) {
    const other = options.backend ? 'backend' : options.redis ? 'redis' : '';
    if (other) {
      throw new RangeError(
        `DistributedLockModule: set either cluster or ${other}, not both`,
      );
    }
    if (Array.isArray(options.cluster) && options.cluster.length === 0) {
      throw new RangeError(
        'DistributedLockModule: cluster needs at least one startup node',
      );
    }
  }
  if (options.nodes !== undefined) {
    const other = options.backend
      ? 'backend'
      : options.redis
        ? 'redis'
        : options.cluster
          ? 'cluster'
          : '';
    if (other) {
      throw new RangeError(
        `DistributedLockModule: set either nodes or ${other}, not both`,
      );
    }
    const count = options.nodes.length;
    if (count < 3 || count % 2 === 0) {
      throw new RangeError(
        `DistributedLockModule: nodes must be an odd number (3 or 5) of independent Redis masters, got ${count}`,
      );
    }
  }
  if (/[{}]/.test(resolved.keyPrefix)) {
    throw new RangeError(
      'DistributedLockModule: keyPrefix must not contain "{" or "}" (Redis Cluster hash tags)',
    );
  }
  return resolved;
}

/** The option that keeps locks elsewhere than on one Redis (`redis`), or ''. */
function otherStoreThanOneRedis(options: DistributedLockModuleOptions): string {
  if (options.backend) return 'backend';
  if (options.cluster) return 'cluster';
  if (options.nodes) return 'nodes';
  return '';
}
