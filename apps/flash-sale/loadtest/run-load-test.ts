import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { getFreePort } from '../../../test/support/ports.js';
import { redactUrl } from '../src/common/redact-url.js';
import { openDatabase, openRedis, type Backend } from './backends.js';
import { repoRoot } from './child-process.js';
import { InstanceClient, type Outcome } from './http-client.js';
import { APP_BUILD, AppInstance } from './instances.js';
import {
  checkInvariants,
  type ClientSuccess,
  type Invariant,
  type SaleState,
} from './invariants.js';

/**
 * A flash sale against several app instances, each a separate OS process on
 * its own port, sharing one Redis and one database; then a check of the
 * invariants against the database and Redis directly.
 *
 *   const report = await runLoadTest({ couponStock: 50, users: 500, requests: 2_000 });
 *   if (!report.ok) ...
 */
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
   * errors. Unset: no crash.
   */
  readonly killOneAt?: number;
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
  /** Seed of the order in which users send. Default 1. */
  readonly seed?: number;
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
  >
> &
  Pick<
    LoadTestOptions,
    'killOneAt' | 'redisUrl' | 'databaseUrl' | 'basePort' | 'seckillWaitMs'
  >;

export interface LoadTestProgress {
  readonly elapsedMs: number;
  readonly total: number;
  readonly sent: number;
  /** Requests answered or failed. */
  readonly finished: number;
  readonly successes: number;
  readonly serverErrors: number;
  /** Connection errors and timeouts. */
  readonly transportErrors: number;
  /** Finished requests per second since the previous progress call. */
  readonly recentRequestsPerSecond: number;
  readonly latencyMs: LatencySummary | null;
  /** What is going on besides the load ("instance 3 killed", ...), if anything. */
  readonly note?: string;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export interface InstanceReport {
  readonly index: number;
  readonly port: number;
  /** Requests sent to it. */
  readonly sent: number;
  /** HTTP answers it gave. */
  readonly responses: number;
  readonly successes: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  /** 1, or 2 after a kill and restart. */
  readonly starts: number;
}

export interface CrashReport {
  readonly instance: number;
  readonly port: number;
  /** The request whose sending triggered the kill (0-based). */
  readonly atRequest: number;
  /** Since the load started, in ms. */
  readonly killedAtMs: number;
  /** When the restarted instance answered /health again (after reconciling), since the load started. */
  readonly restartedAtMs?: number;
  /** Why the restart failed, if it did. */
  readonly restartError?: string;
}

export interface LoadTestReport {
  readonly options: ResolvedLoadTestOptions;
  readonly redis: string;
  readonly database: string;
  readonly couponId: number;
  readonly startedAt: string;
  /** Starting Redis, the database and the instances, in ms. */
  readonly setupMs: number;
  /** From the first request sent to the last one finished, in ms. */
  readonly durationMs: number;
  readonly sent: number;
  readonly finished: number;
  /** Requests never sent (the run was aborted or hit `maxDurationMs`). */
  readonly notSent: number;
  readonly aborted: boolean;
  readonly timedOut: boolean;
  /** HTTP status -> answers. */
  readonly responsesByStatus: Record<string, number>;
  /** `201`, `409 SOLD_OUT`, `429 BUSY`, `error ECONNREFUSED`, ... -> requests. */
  readonly outcomes: Record<string, number>;
  readonly successes: number;
  readonly serverErrors: number;
  readonly transportErrors: number;
  /** Of all HTTP answers (not of connection errors). */
  readonly latencyMs: LatencySummary | null;
  /** Finished requests per second of load. */
  readonly requestsPerSecond: number;
  readonly instances: InstanceReport[];
  /** Distinct users that got a 201. */
  readonly successUsers: number;
  /** Users that got more than one 201. */
  readonly duplicateSuccessUsers: number;
  readonly sale: SaleState;
  readonly crash?: CrashReport;
  readonly invariants: Invariant[];
  /** All invariants hold (and a crashed instance came back). */
  readonly ok: boolean;
}

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
  const { killOneAt } = options;
  if (
    killOneAt !== undefined &&
    !(typeof killOneAt === 'number' && killOneAt > 0 && killOneAt < 1)
  ) {
    throw new LoadTestOptionsError(
      `killOneAt must be a fraction between 0 and 1 (exclusive), got ${String(killOneAt)}`,
    );
  }
  const instances = int('instances', 3, 1, 64);
  const basePort = optionalInt('basePort', 1, 65_535 - instances + 1);
  return {
    couponStock: int('couponStock', 100, 0, 1_000_000),
    users: int('users', 2_000, 1, 10_000_000),
    requests: int('requests', 10_000, 1, 10_000_000),
    concurrency: int('concurrency', 100, 1, 10_000),
    instances,
    lock: options.lock ?? true,
    killOneAt,
    restartDelayMs: int('restartDelayMs', 1_000, 0, 600_000),
    redisUrl: options.redisUrl,
    databaseUrl: options.databaseUrl,
    fromBuild: options.fromBuild ?? false,
    basePort,
    requestTimeoutMs: int('requestTimeoutMs', 15_000, 100, 600_000),
    maxDurationMs: int('maxDurationMs', 300_000, 1_000, 86_400_000),
    startTimeoutMs: int('startTimeoutMs', 90_000, 1_000, 600_000),
    seckillWaitMs: optionalInt('seckillWaitMs', 0, 600_000),
    seed: int('seed', 1, 0, 2 ** 32 - 1),
    instanceEnv: options.instanceEnv ?? {},
    progressIntervalMs: int('progressIntervalMs', 1_000, 50, 60_000),
  };
}

/** Runs the sale, checks the invariants, stops everything it started. */
export async function runLoadTest(
  input: LoadTestOptions = {},
): Promise<LoadTestReport> {
  const options = resolveOptions(input);
  const event = (message: string) => input.onEvent?.(message);
  const startedAt = new Date();
  const setupStarted = performance.now();
  if (options.fromBuild) checkBuild(event);

  const cleanup: (() => Promise<unknown>)[] = [];
  const clients: InstanceClient[] = [];
  try {
    event(
      `Starting ${options.redisUrl ? 'with the given Redis' : 'a private redis-server'} and ` +
        `${options.databaseUrl ? 'the given PostgreSQL' : 'the embedded PGlite database server'}`,
    );
    // Each instance keeps a pool; embedded: 4 connections per instance, as the app does.
    const poolSize = options.databaseUrl ? undefined : 4;
    const [redis, database] = await Promise.all([
      openRedis(options.redisUrl).then(remember),
      openDatabase(options.databaseUrl, {
        fromBuild: options.fromBuild,
        maxConnections: Math.max(100, options.instances * 8 + 10),
      }).then(remember),
    ]);

    event(
      `Redis and the database ready after ${seconds(performance.now() - setupStarted)}`,
    );
    const ports = await choosePorts(options);
    const lockOff = new Set<number>();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...options.instanceEnv,
      REDIS_URL: redis.url,
      DATABASE_URL: database.url,
      LOCAL_REDIS: '0',
      SECKILL_LOCK: options.lock ? 'on' : 'off',
      NO_COLOR: '1',
      ...(poolSize ? { DB_POOL_SIZE: String(poolSize) } : {}),
      ...(options.seckillWaitMs === undefined
        ? {}
        : { SECKILL_WAIT_MS: String(options.seckillWaitMs) }),
    };
    const instances = ports.map(
      (port, index) =>
        new AppInstance({
          index,
          port,
          env,
          fromBuild: options.fromBuild,
          startTimeoutMs: options.startTimeoutMs,
          onLine: (i, line) => {
            if (line.includes('SECKILL_LOCK=off')) lockOff.add(i);
            input.onInstanceLog?.(i, line);
          },
        }),
    );
    cleanup.push(() =>
      Promise.all(instances.map((instance) => instance.stop())),
    );
    event(
      `Starting ${instances.length} app instance(s) from ${options.fromBuild ? APP_BUILD : 'the sources'} ` +
        `on ports ${ports.join(', ')} (lock ${options.lock ? 'on' : 'off'})`,
    );
    const instancesStarted = performance.now();
    await Promise.all(instances.map((instance) => instance.start()));
    event(
      `All instances answer /health after ${seconds(performance.now() - instancesStarted)}`,
    );
    if (!options.lock && lockOff.size < instances.length) {
      throw new Error(
        'The instances did not confirm SECKILL_LOCK=off (is the build older than the sources? run npm run build:app)',
      );
    }

    for (const port of ports) {
      clients.push(
        new InstanceClient(port, options.concurrency, options.requestTimeoutMs),
      );
    }
    const created = await clients[0].json('POST', '/api/coupons', {
      name: `Load test ${startedAt.toISOString()}`,
      price: 1,
      stock: options.couponStock,
    });
    const couponId = (created.body as { id?: unknown } | undefined)?.id;
    if (created.status !== 201 || typeof couponId !== 'number') {
      throw new Error(
        `Creating the coupon failed: ${created.status} ${JSON.stringify(created.body)}`,
      );
    }
    const setupMs = performance.now() - setupStarted;
    event(
      `Coupon ${couponId} with stock ${options.couponStock}: sending ${options.requests} requests ` +
        `from ${options.users} users, ${options.concurrency} at a time`,
    );

    const load = await drive(
      options,
      input,
      clients,
      instances,
      couponId,
      event,
    );

    event('Checking the invariants against the database and Redis');
    const check = await checkInvariants({
      databaseUrl: database.url,
      redisUrl: redis.url,
      couponId,
      successes: load.successes,
    });
    const invariants = [...check.invariants];
    if (load.crash && load.crash.restartedAtMs === undefined) {
      invariants.push({
        name: 'the killed instance came back',
        ok: false,
        detail: load.crash.restartError ?? 'not restarted',
      });
    }
    return buildReport({
      options,
      redis,
      database,
      couponId,
      startedAt,
      setupMs,
      load,
      instances,
      sale: check.state,
      invariants,
    });
  } finally {
    for (const client of clients) client.close();
    for (const close of cleanup.toReversed()) {
      await close().catch((error: unknown) =>
        event(`While stopping: ${(error as Error).message}`),
      );
    }
  }

  function remember<T extends Backend>(backend: T): T {
    cleanup.push(() => backend.close());
    return backend;
  }
}

interface SentRequest {
  readonly instance: number;
  readonly userId: string;
  readonly outcome: Outcome;
}

interface LoadResult {
  readonly records: SentRequest[];
  readonly successes: ClientSuccess[];
  readonly sent: number;
  readonly durationMs: number;
  readonly aborted: boolean;
  readonly timedOut: boolean;
  readonly crash?: CrashReport;
}

/** Sends the requests with bounded concurrency, round-robin over the instances. */
async function drive(
  options: ResolvedLoadTestOptions,
  input: LoadTestOptions,
  clients: InstanceClient[],
  instances: AppInstance[],
  couponId: number,
  event: (message: string) => void,
): Promise<LoadResult> {
  const plan = userOrder(options.requests, options.users, options.seed);
  const width = String(options.users - 1).length;
  const userName = (index: number) => `u${String(index).padStart(width, '0')}`;
  const records: SentRequest[] = [];
  const latencies: number[] = [];
  let sent = 0;
  let successes = 0;
  let serverErrors = 0;
  let transportErrors = 0;
  let aborted = false;
  let timedOut = false;
  let note: string | undefined;

  const started = performance.now();
  const deadline = started + options.maxDurationMs;
  const killAt =
    options.killOneAt === undefined
      ? -1
      : Math.min(
          options.requests - 1,
          Math.floor(options.killOneAt * options.requests),
        );
  let crash: CrashReport | undefined;
  let crashing: Promise<void> | undefined;

  const crashOne = async (atRequest: number) => {
    const victim = instances[instances.length - 1];
    const killedAtMs = performance.now() - started;
    note = `instance ${victim.index + 1} killed`;
    event(
      `SIGKILL instance ${victim.index + 1} (pid ${victim.pid}, port ${victim.port}) at request ${atRequest}`,
    );
    await victim.kill();
    crash = {
      instance: victim.index,
      port: victim.port,
      atRequest,
      killedAtMs,
    };
    await sleep(options.restartDelayMs);
    note = `instance ${victim.index + 1} restarting`;
    event(`Restarting instance ${victim.index + 1} on port ${victim.port}`);
    try {
      await victim.start();
      const restartedAtMs = performance.now() - started;
      crash = { ...crash, restartedAtMs };
      event(
        `Instance ${victim.index + 1} is back after ${((restartedAtMs - killedAtMs) / 1000).toFixed(1)} s (reconciled at startup)`,
      );
    } catch (error) {
      crash = { ...crash, restartError: (error as Error).message };
      event(
        `Restarting instance ${victim.index + 1} failed: ${(error as Error).message}`,
      );
    }
    note = undefined;
  };

  let lastTick = started;
  let lastFinished = 0;
  const progress = (): LoadTestProgress => {
    const now = performance.now();
    const finished = records.length;
    const rate =
      ((finished - lastFinished) * 1000) / Math.max(1, now - lastTick);
    lastTick = now;
    lastFinished = finished;
    return {
      elapsedMs: now - started,
      total: options.requests,
      sent,
      finished,
      successes,
      serverErrors,
      transportErrors,
      recentRequestsPerSecond: rate,
      latencyMs: summarize(latencies),
      note,
    };
  };
  const ticker = input.onProgress
    ? setInterval(
        () => input.onProgress?.(progress()),
        options.progressIntervalMs,
      )
    : undefined;

  const worker = async () => {
    for (;;) {
      if (input.signal?.aborted) {
        aborted = true;
        return;
      }
      if (performance.now() > deadline) {
        timedOut = true;
        return;
      }
      const position = sent;
      if (position >= plan.length) return;
      sent += 1;
      if (position === killAt) crashing = crashOne(position);
      const instance = position % clients.length;
      const userId = userName(plan[position]);
      const outcome = await clients[instance].buy(couponId, userId);
      records.push({ instance, userId, outcome });
      if (outcome.kind === 'error') {
        transportErrors += 1;
        continue;
      }
      latencies.push(outcome.latencyMs);
      if (outcome.status === 201) successes += 1;
      if (outcome.status >= 500) serverErrors += 1;
    }
  };
  try {
    await Promise.all(
      Array.from(
        { length: Math.min(options.concurrency, plan.length) },
        worker,
      ),
    );
  } finally {
    if (ticker) clearInterval(ticker);
  }
  const durationMs = performance.now() - started;
  input.onProgress?.(progress());
  if (crashing) {
    if (crash?.restartedAtMs === undefined) {
      event('Load done; waiting for the killed instance to come back');
    }
    await crashing;
  }
  return {
    records,
    successes: records.flatMap(({ userId, outcome }) =>
      outcome.kind === 'response' && outcome.status === 201
        ? [{ userId, orderId: outcome.orderId }]
        : [],
    ),
    sent,
    durationMs,
    aborted,
    timedOut,
    crash,
  };
}

/**
 * Which user sends each request: every user the same number of times (±1),
 * in an order shuffled by a seeded generator, so runs are repeatable and a
 * user's repeated requests meet each other on different instances.
 */
export function userOrder(
  requests: number,
  users: number,
  seed: number,
): Uint32Array {
  const order = new Uint32Array(requests);
  for (let i = 0; i < requests; i++) order[i] = i % users;
  const random = mulberry32(seed);
  for (let i = requests - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Nearest-rank percentiles. */
export function summarize(values: readonly number[]): LatencySummary | null {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).toSorted();
  const at = (share: number) =>
    sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)];
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: sorted[sorted.length - 1],
    mean: sum / sorted.length,
  };
}

function count(target: Record<string, number>, key: string): void {
  target[key] = (target[key] ?? 0) + 1;
}

function buildReport(parts: {
  options: ResolvedLoadTestOptions;
  redis: Backend;
  database: Backend;
  couponId: number;
  startedAt: Date;
  setupMs: number;
  load: LoadResult;
  instances: AppInstance[];
  sale: SaleState;
  invariants: Invariant[];
}): LoadTestReport {
  const { options, load } = parts;
  const responsesByStatus: Record<string, number> = {};
  const outcomes: Record<string, number> = {};
  const perInstance = parts.instances.map(() => ({
    sent: 0,
    responses: 0,
    successes: 0,
    errors: 0,
  }));
  const latencies: number[] = [];
  const successCount = new Map<string, number>();
  let serverErrors = 0;
  let transportErrors = 0;
  for (const { instance, userId, outcome } of load.records) {
    const stats = perInstance[instance];
    stats.sent += 1;
    if (outcome.kind === 'error') {
      stats.errors += 1;
      transportErrors += 1;
      count(outcomes, `error ${outcome.error}`);
      continue;
    }
    stats.responses += 1;
    latencies.push(outcome.latencyMs);
    count(responsesByStatus, String(outcome.status));
    count(
      outcomes,
      outcome.code
        ? `${outcome.status} ${outcome.code}`
        : String(outcome.status),
    );
    if (outcome.status >= 500) serverErrors += 1;
    if (outcome.status === 201) {
      stats.successes += 1;
      successCount.set(userId, (successCount.get(userId) ?? 0) + 1);
    }
  }
  const invariants = parts.invariants;
  return {
    options: {
      ...options,
      // Without passwords: the report may be printed or stored.
      redisUrl: options.redisUrl && redactUrl(options.redisUrl),
      databaseUrl: options.databaseUrl && redactUrl(options.databaseUrl),
    },
    redis: parts.redis.label,
    database: parts.database.label,
    couponId: parts.couponId,
    startedAt: parts.startedAt.toISOString(),
    setupMs: Math.round(parts.setupMs),
    durationMs: Math.round(load.durationMs),
    sent: load.sent,
    finished: load.records.length,
    notSent: options.requests - load.sent,
    aborted: load.aborted,
    timedOut: load.timedOut,
    responsesByStatus,
    outcomes,
    successes: load.successes.length,
    serverErrors,
    transportErrors,
    latencyMs: summarize(latencies),
    requestsPerSecond:
      load.durationMs > 0 ? (load.records.length * 1000) / load.durationMs : 0,
    instances: parts.instances.map((instance, index) => ({
      index,
      port: instance.port,
      ...perInstance[index],
      starts: instance.starts,
    })),
    successUsers: successCount.size,
    duplicateSuccessUsers: [...successCount.values()].filter((n) => n > 1)
      .length,
    sale: parts.sale,
    crash: load.crash,
    invariants,
    ok: invariants.every((invariant) => invariant.ok),
  };
}

async function choosePorts(
  options: ResolvedLoadTestOptions,
): Promise<number[]> {
  if (options.basePort !== undefined) {
    return Array.from(
      { length: options.instances },
      (_, i) => options.basePort! + i,
    );
  }
  const ports = new Set<number>();
  while (ports.size < options.instances) ports.add(await getFreePort());
  return [...ports];
}

/** The newest modification time of a .ts or .lua file under `dir`. */
function newestSource(dir: string): number {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.(ts|lua)$/.test(entry.name))
    .reduce(
      (latest, entry) =>
        Math.max(
          latest,
          statSync(
            // `parentPath` since Node 20.12, `path` before.
            path.join(
              entry.parentPath ?? (entry as { path?: string }).path ?? dir,
              entry.name,
            ),
          ).mtimeMs,
        ),
      0,
    );
}

/** Fails without a build; warns when the sources changed after it. */
function checkBuild(event: (message: string) => void): void {
  const main = path.join(repoRoot, APP_BUILD);
  if (!existsSync(main)) {
    throw new LoadTestOptionsError(
      `${APP_BUILD} does not exist: run npm run build:app first, or drop --from-build`,
    );
  }
  const built = statSync(main).mtimeMs;
  const sources = Math.max(
    newestSource(path.join(repoRoot, 'apps/flash-sale/src')),
    newestSource(path.join(repoRoot, 'libs/distributed-lock/src')),
  );
  if (sources > built) {
    event(
      `Warning: ${APP_BUILD} is older than the sources; run npm run build:app to test the current code`,
    );
  }
}
