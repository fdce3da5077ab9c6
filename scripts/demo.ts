/**
 * `npm run demo`: the flash-sale sample app, 3 instances, and a simulated crowd.
 *
 * Starts 3 app instances as processes on PORT, PORT+1, PORT+2 (default
 * 3000-3002) sharing one Redis and one database (REDIS_URL and DATABASE_URL,
 * else a private redis-server and the embedded database, both started here),
 * creates a coupon, prints the page's URL, then lets a crowd of users buy it
 * through all three. The page of any instance shows all of them: charts,
 * invariants, and Kill buttons (or --kill-at) to SIGKILL one mid-sale and
 * watch the others carry on. At the end it prints what the crowd got and
 * checks the invariants against the database and Redis, then keeps serving
 * the page until Ctrl-C.
 *
 *   npm run demo                         # watch at http://127.0.0.1:3000/
 *   npm run demo -- --exit               # stop after the summary
 *   npm run demo -- --kill-at 4          # kill the last instance 4 s into the crowd
 *   npm run demo -- --users 500 --stock 50 --seconds 10 --rate 5 --delay 0
 */
import { setMaxListeners } from 'node:events';
import { checkInvariants } from '../apps/flash-sale/loadtest/invariants.js';
import { loadConfig } from '../apps/flash-sale/src/config/app-config.js';
import { startDemoCluster, type DemoCluster } from './demo/cluster.js';
import {
  answerLine,
  count,
  percentile,
  runCrowd,
  sleep,
  type CrowdResult,
} from './demo/crowd.js';
import { parseDemoOptions, type DemoOptions } from './demo/options.js';

interface CouponDetails {
  readonly id: number;
  readonly name: string;
  readonly stock: number;
  readonly remaining: number;
  readonly sold: number;
}

async function api<T>(
  base: string,
  path: string,
  init?: RequestInit,
): Promise<T> {
  const response = await fetch(`${base}${path}`, init);
  const body = (await response.json()) as T & { message?: string };
  if (!response.ok) {
    throw new Error(
      `${init?.method ?? 'GET'} ${path} answered ${response.status}: ${body.message ?? ''}`,
    );
  }
  return body;
}

/** The first instance that answers `path`. */
async function fromAnyInstance<T>(
  bases: readonly string[],
  path: string,
): Promise<T> {
  let last: unknown;
  for (const base of bases) {
    try {
      return await api<T>(base, path);
    } catch (error) {
      last = error;
    }
  }
  throw last;
}

async function createCoupon(
  cluster: DemoCluster,
  options: DemoOptions,
): Promise<CouponDetails> {
  const created = await api<{ id: number }>(cluster.bases[0], '/api/coupons', {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Authorization: `Bearer ${cluster.adminToken}`,
    },
    body: JSON.stringify({
      name: 'Demo coupon',
      price: 9.99,
      stock: options.stock,
    }),
  });
  return api<CouponDetails>(cluster.bases[0], `/api/coupons/${created.id}`);
}

/** `--kill-at`: SIGKILLs the last instance that long into the crowd. */
function scheduleKill(
  cluster: DemoCluster,
  options: DemoOptions,
  signal: AbortSignal,
): void {
  if (options.killAtMs === undefined || cluster.instances.length < 2) return;
  const victim = cluster.instances.at(-1)!;
  void sleep(options.killAtMs, signal).then(async () => {
    if (signal.aborted) return;
    console.log(
      `  SIGKILL instance ${victim.index + 1} (port ${victim.port}, pid ${victim.pid}): the others carry on`,
    );
    await victim.kill();
  });
}

function printCrowd(crowd: CrowdResult): void {
  console.log(
    `\nThe crowd sent ${count(crowd.requests)} requests in ${crowd.seconds.toFixed(1)} s ` +
      `(${count(Math.round(crowd.requests / Math.max(crowd.seconds, 0.001)))}/s).`,
  );
  console.log(`Answers: ${answerLine(crowd.answers)}.`);
  console.log(
    `Response time: median ${percentile(crowd.latencies, 0.5).toFixed(0)} ms, ` +
      `p99 ${percentile(crowd.latencies, 0.99).toFixed(0)} ms ` +
      '(purchases of one coupon queue on each instance for its lock, and each turn of the lock sells the queue).',
  );
  console.log(`Users who got the coupon: ${count(crowd.bought.size)}.`);
}

async function verify(
  cluster: DemoCluster,
  coupon: CouponDetails,
  crowd: CrowdResult,
): Promise<boolean> {
  const { invariants } = await checkInvariants({
    databaseUrl: cluster.databaseUrl,
    redisUrl: cluster.redisUrl,
    couponId: coupon.id,
    successes: [...crowd.bought].flatMap(([userId, ids]) =>
      ids.map((orderId) => ({ userId, orderId })),
    ),
  });
  console.log('\nInvariants:');
  for (const invariant of invariants) {
    console.log(
      `  ${invariant.ok ? 'ok  ' : 'FAIL'} ${invariant.name}: ${invariant.detail}`,
    );
  }
  return invariants.every((invariant) => invariant.ok);
}

async function main(): Promise<number> {
  const options = parseDemoOptions();
  const { port } = loadConfig(process.env);
  console.log(
    `Starting ${options.instances} flash-sale instance(s) on ports ${port}-${port + options.instances - 1} (Redis, database, migrations)…`,
  );
  let cluster: DemoCluster;
  try {
    cluster = await startDemoCluster(options.instances, port, (index, line) => {
      if (/\b(error|warn)/i.test(line))
        console.log(`  app ${index + 1}: ${line}`);
    });
  } catch (error) {
    console.error(`Cannot start the demo: ${(error as Error).message}`);
    return 1;
  }

  const stop = new AbortController();
  // Every waiting user listens for it.
  setMaxListeners(options.users + 10, stop.signal);
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      console.error(`${signal} again: exiting now`);
      process.exit(130);
    }
    console.log(`\n${signal}: stopping…`);
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let ok = true;
  try {
    const coupon = await createCoupon(cluster, options);
    console.log(
      `Created coupon #${coupon.id} "${coupon.name}": ${count(coupon.stock)} in stock.`,
    );
    console.log(`\nAdmin token (ADMIN_TOKEN): ${cluster.adminToken}`);
    console.log(
      `Open ${cluster.bases[0]}/#admin=${cluster.adminToken} to watch the sale ` +
        `(any of ${cluster.bases.join(', ')} shows all instances; the token enables the Kill buttons and the form).\n`,
    );
    if (options.delayMs > 0) {
      console.log(
        `The crowd (${count(options.users)} users) arrives in ${options.delayMs / 1_000} s…`,
      );
      await sleep(options.delayMs, stop.signal);
    }
    if (!stop.signal.aborted) {
      console.log(
        `Crowd: ${count(options.users)} users over ${options.rampMs / 1_000} s through ${cluster.bases.length} instance(s), ` +
          `each buying about ${options.rate} times a second, for ${(options.rampMs + options.tailMs) / 1_000} s.`,
      );
      scheduleKill(cluster, options, stop.signal);
      const crowd = await runCrowd(
        cluster.bases,
        coupon.id,
        options,
        stop.signal,
        async (progress) => {
          const now = await fromAnyInstance<CouponDetails>(
            cluster.bases,
            `/api/coupons/${coupon.id}`,
          );
          console.log(
            `  ${progress.seconds.toFixed(1).padStart(5)} s  remaining ${count(now.remaining)} of ${count(now.stock)}, ` +
              `orders ${count(now.sold)}, requests ${count(progress.requests)}`,
          );
        },
      );
      printCrowd(crowd);
      ok = await verify(cluster, coupon, crowd);
      console.log(
        ok ? '\nAll invariants hold.' : '\nAn invariant does not hold!',
      );
    }
    if (!options.exit && !stop.signal.aborted) {
      console.log(
        `\nStill serving ${cluster.bases.join(', ')} (create coupons, buy and kill instances from the page). Press Ctrl-C to stop.`,
      );
      await new Promise<void>((resolve) =>
        stop.signal.addEventListener('abort', () => resolve(), { once: true }),
      );
    }
  } catch (error) {
    console.error(`The demo failed: ${(error as Error).message}`);
    ok = false;
  } finally {
    await cluster.close();
  }
  return ok ? 0 : 1;
}

process.exitCode = await main();
