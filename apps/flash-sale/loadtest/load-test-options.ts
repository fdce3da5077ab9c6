import type { LoadTestProgress } from './load-test-report.js';

/** The options of `runLoadTest` (run-load-test.ts), every one optional. */
export interface LoadTestOptions {
  /** Units of the coupon on sale. Default 100. */
  readonly couponStock?: number;
  /** Distinct buyers; the requests are spread evenly over them. Default 2000. */
  readonly users?: number;
  /** Purchase requests in total. Default 10000. */
  readonly requests?: number;
  /** Requests in flight at once, over all instances. Default 100. */
  readonly concurrency?: number;
  /** App instances (OS processes). Default 3. */
  readonly instances?: number;
  /** Purchases hold the coupon's lock (default); false runs the instances with SECKILL_LOCK=off. */
  readonly lock?: boolean;
  /**
   * SIGKILL one instance (the last) once this share of the requests has been
   * sent, then start it again on the same port after `restartDelayMs` (its
   * startup reconciles the coupon). Requests it misses count as connection
   * errors. Unset: no crash (unless `killHolder`).
   */
  readonly killOneAt?: number;
  /**
   * Kill the instance that holds the coupon's lock instead of the last one:
   * at `killOneAt` (default 0.25), freeze an instance whose session holds the
   * lock, check in Redis that it still does, SIGKILL it (else thaw it and try
   * again, a bounded number of times); restart it once another instance has
   * taken the lock over (and `restartDelayMs` passed). Needs the lock and 2+
   * instances. Default false.
   */
  readonly killHolder?: boolean;
  /** Pause between the kill and the restart, in ms. Default 1000. */
  readonly restartDelayMs?: number;
  /** Redis the instances share. Default: a private redis-server on a free port, stopped afterwards. */
  readonly redisUrl?: string;
  /**
   * PostgreSQL the instances share. Default: the embedded PGlite server as a
   * process of its own, with its data in a temporary directory.
   */
  readonly databaseUrl?: string;
  /** Run the built app (`npm run build:app`) instead of the TypeScript sources. Default false. */
  readonly fromBuild?: boolean;
  /** Ports `basePort`, `basePort + 1`, ...; default: free ports. */
  readonly basePort?: number;
  /** A request without an answer after this long is dropped and counted as an error, in ms. Default 15000. */
  readonly requestTimeoutMs?: number;
  /** No request is sent after this long, in ms. Default 300000. */
  readonly maxDurationMs?: number;
  /** Longest wait for an instance to answer `GET /health`, in ms. Default 90000. */
  readonly startTimeoutMs?: number;
  /** SECKILL_WAIT_MS of the instances (how long a purchase waits for the lock). Default: the app's. */
  readonly seckillWaitMs?: number;
  /** SECKILL_SESSION_TTL_MS of the instances (their lock sessions' TTL). Default: the app's, 5000. */
  readonly seckillSessionTtlMs?: number;
  /** SECKILL_BATCH_MAX of the instances (most purchases sold per turn of the lock). Default: the app's, 64. */
  readonly seckillBatchMax?: number;
  /** SECKILL_FREE_ON_DISCONNECT of the instances. Default false. */
  readonly freeOnDisconnect?: boolean;
  /** Seed of the order in which users send. Default 1. */
  readonly seed?: number;
  /**
   * Requests sent first for a coupon of their own (stock warmup / 20, users
   * warmup / 4), at the same concurrency, and left out of the report: the
   * instances then run warm, as they would after serving traffic before a
   * sale. Default 0.
   */
  readonly warmup?: number;
  /** More environment variables for the instances. */
  readonly instanceEnv?: Readonly<Record<string, string>>;
  /** How often `onProgress` is called, in ms. Default 1000. */
  readonly progressIntervalMs?: number;
  readonly onProgress?: (progress: LoadTestProgress) => void;
  /** Setup and crash events, one line each ("starting 3 instances", ...). */
  readonly onEvent?: (message: string) => void;
  /** Every line an instance logs, with the instance's index. */
  readonly onInstanceLog?: (instance: number, line: string) => void;
  /** Aborting stops sending; the run then checks and reports what happened so far. */
  readonly signal?: AbortSignal;
}

type Callbacks = 'onProgress' | 'onEvent' | 'onInstanceLog' | 'signal';

/** The options a run used, defaults applied. */
export type ResolvedLoadTestOptions = Required<
  Omit<
    LoadTestOptions,
    | Callbacks
    | 'killOneAt'
    | 'redisUrl'
    | 'databaseUrl'
    | 'basePort'
    | 'seckillWaitMs'
    | 'seckillSessionTtlMs'
    | 'seckillBatchMax'
  >
> &
  Pick<
    LoadTestOptions,
    | 'killOneAt'
    | 'redisUrl'
    | 'databaseUrl'
    | 'basePort'
    | 'seckillWaitMs'
    | 'seckillSessionTtlMs'
    | 'seckillBatchMax'
  >;

/** Thrown for options that make no sense. */
export class LoadTestOptionsError extends Error {
  override readonly name = 'LoadTestOptionsError';
}

export function resolveOptions(
  options: LoadTestOptions = {},
): ResolvedLoadTestOptions {
  const int = (
    name: keyof LoadTestOptions,
    fallback: number,
    min: number,
    max: number,
  ): number => {
    const value = options[name] ?? fallback;
    if (
      typeof value !== 'number' ||
      !Number.isInteger(value) ||
      value < min ||
      value > max
    ) {
      throw new LoadTestOptionsError(
        `${name} must be an integer between ${min} and ${max}, got ${String(value)}`,
      );
    }
    return value;
  };
  const optionalInt = (
    name: keyof LoadTestOptions,
    min: number,
    max: number,
  ): number | undefined =>
    options[name] === undefined ? undefined : int(name, 0, min, max);
  const killHolder = options.killHolder ?? false;
  const killOneAt = options.killOneAt ?? (killHolder ? 0.25 : undefined);
  if (
    killOneAt !== undefined &&
    !(typeof killOneAt === 'number' && killOneAt > 0 && killOneAt < 1)
  ) {
    throw new LoadTestOptionsError(
      `killOneAt must be a fraction between 0 and 1 (exclusive), got ${String(killOneAt)}`,
    );
  }
  const instances = int('instances', 3, 1, 64);
  if (killHolder && (instances < 2 || options.lock === false)) {
    throw new LoadTestOptionsError(
      'killHolder needs the lock and at least 2 instances (one to kill, one to take the lock over)',
    );
  }
  const basePort = optionalInt('basePort', 1, 65_535 - instances + 1);
  return {
    couponStock: int('couponStock', 100, 0, 1_000_000),
    users: int('users', 2_000, 1, 10_000_000),
    requests: int('requests', 10_000, 1, 10_000_000),
    concurrency: int('concurrency', 100, 1, 10_000),
    instances,
    lock: options.lock ?? true,
    killOneAt,
    killHolder,
    freeOnDisconnect: options.freeOnDisconnect ?? false,
    restartDelayMs: int('restartDelayMs', 1_000, 0, 600_000),
    redisUrl: options.redisUrl,
    databaseUrl: options.databaseUrl,
    fromBuild: options.fromBuild ?? false,
    basePort,
    requestTimeoutMs: int('requestTimeoutMs', 15_000, 100, 600_000),
    maxDurationMs: int('maxDurationMs', 300_000, 1_000, 86_400_000),
    startTimeoutMs: int('startTimeoutMs', 90_000, 1_000, 600_000),
    seckillWaitMs: optionalInt('seckillWaitMs', 0, 600_000),
    seckillSessionTtlMs: optionalInt('seckillSessionTtlMs', 100, 600_000),
    seckillBatchMax: optionalInt('seckillBatchMax', 1, 1_000),
    seed: int('seed', 1, 0, 2 ** 32 - 1),
    warmup: int('warmup', 0, 0, 10_000_000),
    instanceEnv: options.instanceEnv ?? {},
    progressIntervalMs: int('progressIntervalMs', 1_000, 50, 60_000),
  };
}
