import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { getFreePort } from '../../../test/support/ports.js';
import { configuredAdminToken } from '../src/web/admin-token.guard.js';
import { openDatabase, openRedis, type Backend } from './backends.js';
import { repoRoot } from './child-process.js';
import { drive, type CrashScenario } from './drive-load.js';
import { InstanceClient } from './http-client.js';
import { killLastInstance } from './instance-crash.js';
import { APP_BUILD, AppInstance } from './instances.js';
import { checkInvariants } from './invariants.js';
import { LockHolderKill } from './kill-holder.js';
import {
  LoadTestOptionsError,
  resolveOptions,
  type LoadTestOptions,
  type ResolvedLoadTestOptions,
} from './load-test-options.js';
import { buildReport, type LoadTestReport } from './load-test-report.js';
import { scrapeTimeHistograms, timeSplitBetween } from './time-split.js';

/**
 * A flash sale against several app instances, each a separate OS process on
 * its own port, sharing one Redis and one database; then a check of the
 * invariants against the database and Redis directly.
 *
 *   const report = await runLoadTest({ couponStock: 50, users: 500, requests: 2_000 });
 *   if (!report.ok) ...
 *
 * The options and the report are in load-test-options.ts and
 * load-test-report.ts, the load itself in drive-load.ts.
 */
export * from './load-test-options.js';
export * from './load-test-report.js';
export { userOrder } from './drive-load.js';
export type { HolderKillReport, AcrossKill } from './kill-holder-report.js';

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

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
    // The instances' admin token, to create the coupon.
    const adminToken =
      configuredAdminToken() ?? randomBytes(24).toString('hex');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ADMIN_TOKEN: adminToken,
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
      ...(options.seckillSessionTtlMs === undefined
        ? {}
        : { SECKILL_SESSION_TTL_MS: String(options.seckillSessionTtlMs) }),
      ...(options.seckillBatchMax === undefined
        ? {}
        : { SECKILL_BATCH_MAX: String(options.seckillBatchMax) }),
      ...(options.freeOnDisconnect ? { SECKILL_FREE_ON_DISCONNECT: 'on' } : {}),
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

    // An instance that found its port taken is on another one now.
    const servedPorts = instances.map((instance) => instance.port);
    for (const port of servedPorts) {
      clients.push(
        new InstanceClient(port, options.concurrency, options.requestTimeoutMs),
      );
    }
    const createCoupon = async (name: string, stock: number) => {
      const created = await clients[0].json(
        'POST',
        '/api/coupons',
        { name, price: 1, stock },
        { Authorization: `Bearer ${env.ADMIN_TOKEN}` },
      );
      const id = (created.body as { id?: unknown } | undefined)?.id;
      if (created.status !== 201 || typeof id !== 'number') {
        throw new Error(
          `Creating the coupon failed: ${created.status} ${JSON.stringify(created.body)}`,
        );
      }
      return id;
    };
    if (options.warmup > 0) {
      const warmCoupon = await createCoupon(
        `Load test warm-up ${startedAt.toISOString()}`,
        Math.max(1, Math.round(options.warmup / 20)),
      );
      event(
        `Warm-up: ${options.warmup} requests for coupon ${warmCoupon}, left out of the report`,
      );
      await drive(
        {
          ...options,
          requests: options.warmup,
          users: Math.max(1, Math.round(options.warmup / 4)),
          seed: options.seed + 1,
        },
        { signal: input.signal },
        clients,
        warmCoupon,
      );
    }
    const couponId = await createCoupon(
      `Load test ${startedAt.toISOString()}`,
      options.couponStock,
    );
    // What the instances' metrics held before the load (the warm-up, the
    // startup), taken off what they hold after it.
    const metricsBefore = await scrapeTimeHistograms(servedPorts);
    const setupMs = performance.now() - setupStarted;
    event(
      `Coupon ${couponId} with stock ${options.couponStock}: sending ${options.requests} requests ` +
        `from ${options.users} users, ${options.concurrency} at a time`,
    );

    const killAt =
      options.killOneAt === undefined
        ? undefined
        : Math.min(
            options.requests - 1,
            Math.floor(options.killOneAt * options.requests),
          );
    const holderKill =
      killAt !== undefined && options.killHolder
        ? new LockHolderKill(
            instances,
            redis.url,
            couponId,
            killAt,
            options.restartDelayMs,
            event,
          )
        : undefined;
    const crash: CrashScenario | undefined =
      holderKill ??
      (killAt === undefined
        ? undefined
        : killLastInstance(instances, killAt, options.restartDelayMs, event));
    const load = await drive(options, input, clients, couponId, crash);
    // Before the invariant check: the instances still run, and nothing
    // else has touched their metrics since the last request.
    const timeSplit = timeSplitBetween(
      metricsBefore,
      await scrapeTimeHistograms(instances.map((i) => i.port)),
    );
    const holderKillReport = holderKill?.report(load.records);

    event('Checking the invariants against the database and Redis');
    const check = await checkInvariants({
      databaseUrl: database.url,
      redisUrl: redis.url,
      couponId,
      successes: load.successes,
    });
    const invariants = [...check.invariants];
    if (holderKillReport) {
      invariants.push({
        name: 'the killed instance held the coupon lock',
        ok: holderKillReport.caught,
        detail: holderKillReport.caught
          ? `instance ${holderKillReport.instance! + 1} held ${holderKillReport.lockKey} as ${holderKillReport.token}`
          : `no instance was caught holding it in ${holderKillReport.tries} tries`,
      });
    }
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
      holderKill: holderKillReport,
      timeSplit,
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
