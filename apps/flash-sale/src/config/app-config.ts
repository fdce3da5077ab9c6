import path from 'node:path';

/** Injection token of the resolved {@link AppConfig}. */
export const APP_CONFIG = Symbol('APP_CONFIG');

/** Everything the app reads from its environment, with defaults applied. */
export interface AppConfig {
  /** HTTP port (`PORT`, default 3000). */
  readonly port: number;
  /**
   * Redis URL (`REDIS_URL`). Undefined means "the default
   * `redis://127.0.0.1:6379`, or a local fallback server when nothing answers
   * there" (see {@link localRedis}).
   */
  readonly redisUrl?: string;
  /**
   * Redis Cluster startup nodes (`REDIS_CLUSTER_NODES=host:port,...`). When
   * set, the app and its locks use the cluster; `redisUrl` and the local
   * fallback are ignored.
   */
  readonly redisCluster?: readonly RedisAddress[];
  /**
   * Redis behind Sentinel (`REDIS_SENTINELS=host:port,...` and
   * `REDIS_SENTINEL_NAME`, default `mymaster`). When set, the app and its
   * locks use the master the Sentinels name; `redisUrl` and the local
   * fallback are ignored. Never together with {@link redisCluster}.
   */
  readonly redisSentinel?: {
    readonly sentinels: readonly RedisAddress[];
    readonly name: string;
  };
  /**
   * PostgreSQL URL (`DATABASE_URL`). Undefined means the embedded PGlite
   * database shared by every instance on this machine (see {@link embeddedDb}).
   */
  readonly databaseUrl?: string;
  readonly embeddedDb: {
    /** Loopback port of the shared embedded database (`EMBEDDED_DB_PORT`, default 54329). */
    readonly port: number;
    /** Its data directory (`EMBEDDED_DB_DIR`, default `.data/flash-sale-db`). */
    readonly dataDir: string;
    /** Connections the hosting instance accepts from all instances together (`EMBEDDED_DB_MAX_CONNECTIONS`, default 100). */
    readonly maxConnections: number;
  };
  readonly localRedis: {
    /**
     * Start a `redis-server` child process when `REDIS_URL` is unset and
     * nothing answers on 127.0.0.1:6379 (`LOCAL_REDIS`, default on; `0` turns it off).
     */
    readonly enabled: boolean;
    /**
     * Its port (`LOCAL_REDIS_PORT`, default 6390). Fixed rather than random so
     * that every instance on this machine finds the same server: instances
     * with separate Redis servers would hold separate locks and sell the
     * stock once each.
     */
    readonly port: number;
  };
  /** Connections per instance (`DB_POOL_SIZE`; default 10, or 4 on the embedded database). */
  readonly dbPoolSize?: number;
  readonly seckill: {
    /** How long a purchase waits for the coupon's lock, in ms (`SECKILL_WAIT_MS`, default 10000). */
    readonly waitTime: number;
    /**
     * Whether a purchase holds the coupon's distributed lock (`SECKILL_LOCK`,
     * default on). Off, purchases rely on seckill.lua and the database's
     * unique constraint alone: only for load tests that measure what the lock
     * costs, never for a real sale (reconciliation then races with purchases).
     */
    readonly lock: boolean;
    /**
     * TTL of each instance's lock session, in ms (`SECKILL_SESSION_TTL_MS`,
     * default 5000): a coupon's lock held by an instance that died is free
     * for the next purchase within this long.
     */
    readonly sessionTtl: number;
    /**
     * Free a dead instance's coupon locks as soon as Redis sees its
     * connection close, not after `sessionTtl` (`SECKILL_FREE_ON_DISCONNECT`,
     * default off; one Redis or Sentinel, not Cluster). See the lock
     * module's `freeOnDisconnect`.
     */
    readonly freeOnDisconnect: boolean;
    /**
     * Most purchases of one coupon an instance sells per turn of the coupon's
     * lock (`SECKILL_BATCH_MAX`, default 64): the purchases queued on the
     * instance while another turn ran go together, through one seckill.lua
     * call and one database statement. `1` sells them one turn each.
     */
    readonly batchMax: number;
  };
  /** Longest time one Redis or database call may take before the request fails with 503, in ms (`BACKEND_TIMEOUT_MS`, default 2000). */
  readonly backendTimeout: number;
  /** How long an instance keeps a coupon's name, price and sale window in memory, in ms (`COUPON_CACHE_MS`, default 2000). */
  readonly couponCacheTtl: number;
  /**
   * How often each instance compares Redis and `coupons.sold` with the orders
   * of every coupon on sale and repairs what differs, in ms
   * (`STOCK_REPAIR_INTERVAL_MS`, default 15000; `0` turns it off).
   */
  readonly stockRepairInterval: number;
}

/** A Redis node or Sentinel address. */
export interface RedisAddress {
  readonly host: string;
  readonly port: number;
}

/** Configuration overrides, e.g. from tests: nested objects are merged. */
export type AppConfigOverrides = Partial<
  Omit<AppConfig, 'embeddedDb' | 'localRedis' | 'seckill'>
> & {
  readonly embeddedDb?: Partial<AppConfig['embeddedDb']>;
  readonly localRedis?: Partial<AppConfig['localRedis']>;
  readonly seckill?: Partial<AppConfig['seckill']>;
};

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const DEFAULT_SENTINEL_NAME = 'mymaster';

/** Thrown at startup for a malformed environment variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Reads the configuration from `env`, failing fast with the variable's name on bad values. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
): AppConfig {
  const text = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  const int = (name: string, fallback: number, min: number, max: number) => {
    const value = text(name);
    if (value === undefined) return fallback;
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new ConfigError(
        `${name} must be an integer between ${min} and ${max}, got ${JSON.stringify(value)}`,
      );
    }
    return Number(value);
  };
  const flag = (name: string, fallback: boolean) => {
    const value = text(name)?.toLowerCase();
    if (value === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(value)) return true;
    if (['0', 'false', 'no', 'off'].includes(value)) return false;
    throw new ConfigError(
      `${name} must be 1/0, true/false, yes/no or on/off, got ${JSON.stringify(value)}`,
    );
  };
  const url = (name: string, schemes: string[]) => {
    const value = text(name);
    if (value === undefined) return undefined;
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new ConfigError(`${name} is not a valid URL`);
    }
    if (!schemes.includes(parsed.protocol)) {
      throw new ConfigError(
        `${name} must start with ${schemes.map((s) => `${s}//`).join(' or ')}`,
      );
    }
    return value;
  };
  const dbPoolSize = text('DB_POOL_SIZE');
  const redisCluster = addresses(text, 'REDIS_CLUSTER_NODES');
  const sentinels = addresses(text, 'REDIS_SENTINELS');
  const sentinelName = text('REDIS_SENTINEL_NAME');
  if (redisCluster && sentinels) {
    throw new ConfigError(
      'Set either REDIS_CLUSTER_NODES (Redis Cluster) or REDIS_SENTINELS (Sentinel), not both',
    );
  }
  if (sentinelName !== undefined && !sentinels) {
    throw new ConfigError(
      'REDIS_SENTINEL_NAME is set but REDIS_SENTINELS is not: set REDIS_SENTINELS=host:port,...',
    );
  }
  return {
    port: int('PORT', 3000, 0, 65535),
    redisUrl: url('REDIS_URL', ['redis:', 'rediss:']),
    redisCluster,
    redisSentinel: sentinels && {
      sentinels,
      name: sentinelName ?? DEFAULT_SENTINEL_NAME,
    },
    databaseUrl: url('DATABASE_URL', ['postgres:', 'postgresql:']),
    embeddedDb: {
      port: int('EMBEDDED_DB_PORT', 54329, 1, 65535),
      dataDir: path.resolve(
        cwd,
        text('EMBEDDED_DB_DIR') ?? path.join('.data', 'flash-sale-db'),
      ),
      maxConnections: int('EMBEDDED_DB_MAX_CONNECTIONS', 100, 2, 10_000),
    },
    localRedis: {
      enabled: flag('LOCAL_REDIS', true),
      port: int('LOCAL_REDIS_PORT', 6390, 1, 65535),
    },
    dbPoolSize:
      dbPoolSize === undefined ? undefined : int('DB_POOL_SIZE', 10, 1, 1000),
    seckill: {
      waitTime: int('SECKILL_WAIT_MS', 10_000, 0, 600_000),
      lock: flag('SECKILL_LOCK', true),
      sessionTtl: int('SECKILL_SESSION_TTL_MS', 5_000, 300, 600_000),
      freeOnDisconnect: flag('SECKILL_FREE_ON_DISCONNECT', false),
      batchMax: int('SECKILL_BATCH_MAX', 64, 1, 1_000),
    },
    backendTimeout: int('BACKEND_TIMEOUT_MS', 2_000, 50, 60_000),
    couponCacheTtl: int('COUPON_CACHE_MS', 2_000, 0, 3_600_000),
    stockRepairInterval: int('STOCK_REPAIR_INTERVAL_MS', 15_000, 0, 3_600_000),
  };
}

/**
 * A comma-separated list of `host:port` (`[v6 address]:port` for IPv6), or
 * undefined when the variable is unset or blank.
 */
function addresses(
  text: (name: string) => string | undefined,
  name: string,
): RedisAddress[] | undefined {
  const value = text(name);
  if (value === undefined) return undefined;
  return value.split(',').map((entry) => {
    const item = entry.trim();
    const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/@]+)):(\d{1,5})$/.exec(
      item,
    );
    const port = Number(match?.[3]);
    if (!match || port < 1 || port > 65535) {
      throw new ConfigError(
        `${name} must be a comma-separated list of host:port (port 1-65535), ` +
          `got ${JSON.stringify(item)} in ${JSON.stringify(value)}`,
      );
    }
    return { host: match[1] ?? match[2], port };
  });
}

/** `base` with `overrides` applied (one level deep for the nested groups). */
export function mergeConfig(
  base: AppConfig,
  overrides: AppConfigOverrides = {},
): AppConfig {
  return {
    ...base,
    ...overrides,
    embeddedDb: { ...base.embeddedDb, ...overrides.embeddedDb },
    localRedis: { ...base.localRedis, ...overrides.localRedis },
    seckill: { ...base.seckill, ...overrides.seckill },
  };
}
