/**
 * `npm run demo`: the flash-sale sample app with a simulated crowd.
 *
 * Starts the app on PORT (default 3000) with its no-setup defaults (Redis at
 * 127.0.0.1:6379 or a local redis-server it starts, the embedded PGlite
 * database when DATABASE_URL is unset), makes sure a coupon is on sale,
 * prints the page's URL, then lets a crowd of users try to buy it. The page
 * shows the stock drop to 0 and the orders arrive. At the end it prints what
 * the crowd got and checks the invariants against the database, then keeps
 * serving the page until Ctrl-C.
 *
 *   npm run demo                         # watch at http://127.0.0.1:3000/
 *   npm run demo -- --exit               # stop after the summary
 *   npm run demo -- --users 500 --stock 50 --seconds 10 --rate 5 --delay 0
 */
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import type { INestApplication, LoggerService } from '@nestjs/common';
import { loadConfig } from '../apps/flash-sale/src/config/app-config.js';
import { DATABASE } from '../apps/flash-sale/src/database/database.module.js';
import type { Db } from '../apps/flash-sale/src/database/database.types.js';
import { createApp } from '../apps/flash-sale/src/main.js';

const USAGE = `Usage: npm run demo -- [options]

  --users N     simulated users (default 200)
  --rate R      requests per second per user (default 5)
  --seconds S   how long users keep arriving (default 8); they keep trying 2 s more
  --stock N     stock of the coupon the demo creates (default 20)
  --delay S     seconds to wait before the crowd arrives (default 5; 0 with --exit)
  --exit        stop after the summary instead of serving the page until Ctrl-C

Environment: PORT (default 3000), REDIS_URL, DATABASE_URL and the app's other
variables (see apps/flash-sale/README.md).`;

interface Options {
  readonly users: number;
  readonly rate: number;
  readonly rampMs: number;
  readonly tailMs: number;
  readonly stock: number;
  readonly delayMs: number;
  readonly exit: boolean;
}

function numberOption(
  name: string,
  value: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < min || parsed > max) {
    console.error(`--${name} must be a number from ${min} to ${max}\n`);
    console.error(USAGE);
    process.exit(2);
  }
  return parsed;
}

function parseDemoArgs() {
  return parseArgs({
    options: {
      users: { type: 'string' },
      rate: { type: 'string' },
      seconds: { type: 'string' },
      stock: { type: 'string' },
      delay: { type: 'string' },
      exit: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

function parseOptions(): Options {
  let parsed: ReturnType<typeof parseDemoArgs>;
  try {
    parsed = parseDemoArgs();
  } catch (error) {
    console.error(`${(error as Error).message}\n`);
    console.error(USAGE);
    process.exit(2);
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  return {
    users: Math.round(numberOption('users', values.users, 200, 1, 5_000)),
    rate: numberOption('rate', values.rate, 5, 0.1, 50),
    rampMs: numberOption('seconds', values.seconds, 8, 0, 120) * 1_000,
    tailMs: 2_000,
    stock: Math.round(numberOption('stock', values.stock, 20, 1, 1_000_000)),
    delayMs:
      numberOption('delay', values.delay, values.exit ? 0 : 5, 0, 600) * 1_000,
    exit: values.exit,
  };
}

/** Nest's own start-up lines (modules, routes) are noise here; the app's are kept. */
const QUIET_CONTEXTS = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
]);

const demoLogger: LoggerService = {
  log: (message: unknown, ...rest: unknown[]) => {
    const context = rest.at(-1);
    if (typeof context === 'string' && QUIET_CONTEXTS.has(context)) return;
    console.log(`  app: ${String(message)}`);
  },
  warn: (message: unknown) => console.warn(`  app warning: ${String(message)}`),
  error: (message: unknown, ...rest: unknown[]) => {
    const detail = rest.find(
      (part) => typeof part === 'string' && part.includes('\n'),
    );
    console.error(`  app error: ${String(message)}`);
    if (detail) console.error(detail);
  },
};

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

const count = (value: number) => value.toLocaleString('en-US');

interface CouponDetails {
  readonly id: number;
  readonly name: string;
  readonly stock: number;
  readonly remaining: number;
  readonly sold: number;
  readonly saleState: string;
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

/** A coupon on sale that the crowd can sell out, or a new one. */
async function pickCoupon(
  base: string,
  options: Options,
): Promise<{ coupon: CouponDetails; created: boolean }> {
  const coupons = await api<CouponDetails[]>(base, '/api/coupons?limit=100');
  const open = coupons.find(
    (coupon) =>
      coupon.saleState === 'on_sale' &&
      coupon.remaining > 0 &&
      coupon.remaining <= options.users,
  );
  if (open) return { coupon: open, created: false };
  const created = await api<{ id: number }>(base, '/api/coupons', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      name: 'Demo coupon',
      price: 9.99,
      stock: options.stock,
    }),
  });
  return {
    coupon: await api<CouponDetails>(base, `/api/coupons/${created.id}`),
    created: true,
  };
}

interface CrowdResult {
  /** Ends every user id of this run. */
  readonly run: string;
  readonly requests: number;
  readonly seconds: number;
  /** Answers by `ok` or error code. */
  readonly answers: Map<string, number>;
  /** Order ids of the 201 answers, by user. */
  readonly bought: Map<string, number[]>;
  /** Response times in ms, in the order they came. */
  readonly latencies: number[];
}

/**
 * `users` users arrive over `rampMs`, ever faster (user i at
 * rampMs * sqrt(i / users)), and each sends purchases one at a time, the next
 * about 1/rate s after the previous answer (so `rate` a second while answers
 * are quick), until `rampMs + tailMs` after the start.
 */
async function runCrowd(
  base: string,
  couponId: number,
  options: Options,
  signal: AbortSignal,
  onTick: (result: CrowdResult) => Promise<void>,
): Promise<CrowdResult> {
  // user-001-<run>: the number first, where the page does not cut it off.
  const run = randomBytes(3).toString('hex');
  const answers = new Map<string, number>();
  const bought = new Map<string, number[]>();
  const latencies: number[] = [];
  let requests = 0;
  const started = performance.now();
  const endsAt = started + options.rampMs + options.tailMs;
  const pause = 1_000 / options.rate;
  const snapshot = (): CrowdResult => ({
    run,
    requests,
    seconds: (performance.now() - started) / 1_000,
    answers,
    bought,
    latencies,
  });

  const user = async (index: number) => {
    const userId = `user-${String(index + 1).padStart(3, '0')}-${run}`;
    await sleep(options.rampMs * Math.sqrt(index / options.users), signal);
    while (performance.now() < endsAt && !signal.aborted) {
      let answer: string;
      const sent = performance.now();
      try {
        const response = await fetch(`${base}/api/coupon/seckill/${couponId}`, {
          method: 'POST',
          headers: { userId },
        });
        const body = (await response.json()) as {
          ok?: boolean;
          orderId?: number;
          code?: string;
        };
        if (response.status === 201 && body.ok === true) {
          answer = 'ok';
          bought.set(userId, [...(bought.get(userId) ?? []), body.orderId!]);
        } else {
          answer = body.code ?? `HTTP ${response.status}`;
        }
      } catch {
        answer = 'NO_ANSWER';
      }
      requests += 1;
      latencies.push(performance.now() - sent);
      answers.set(answer, (answers.get(answer) ?? 0) + 1);
      // About `rate` a second, with jitter so that users do not move in step.
      await sleep(pause * (0.5 + Math.random()), signal);
    }
  };

  const done = new AbortController();
  const stopTicking = AbortSignal.any([signal, done.signal]);
  const ticker = (async () => {
    for (;;) {
      await sleep(1_000, stopTicking);
      if (stopTicking.aborted) return;
      await onTick(snapshot()).catch(() => undefined);
    }
  })();
  await Promise.all(Array.from({ length: options.users }, (_, i) => user(i)));
  done.abort();
  await ticker;
  return snapshot();
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function answerLine(answers: Map<string, number>): string {
  return [...answers]
    .toSorted((a, b) => b[1] - a[1])
    .map(([answer, n]) => `${answer} ${count(n)}`)
    .join(', ');
}

/** The invariants, checked against the database and Redis after the crowd. */
async function checkInvariants(
  app: INestApplication,
  base: string,
  coupon: CouponDetails,
  crowd: CrowdResult,
): Promise<boolean> {
  const db = app.get<Db>(DATABASE);
  const after = await api<CouponDetails>(base, `/api/coupons/${coupon.id}`);
  const totals = await db
    .selectFrom('orders')
    .select((eb) => [
      eb.fn.countAll<string>().as('orders'),
      eb.fn.count<string>('userId').distinct().as('buyers'),
    ])
    .where('couponId', '=', coupon.id)
    .executeTakeFirstOrThrow();
  const orders = Number(totals.orders);
  const buyers = Number(totals.buyers);
  const crowdOrders = await db
    .selectFrom('orders')
    .select(['id', 'userId'])
    .where('couponId', '=', coupon.id)
    .where('userId', 'like', `user-%-${crowd.run}`)
    .execute();
  const inDatabase = new Map(crowdOrders.map((row) => [row.userId, row.id]));
  const okAnswers = [...crowd.bought.values()].flat().length;
  const everyOkStored = [...crowd.bought].every(
    ([userId, ids]) => ids.length === 1 && inDatabase.get(userId) === ids[0],
  );

  const checks: [string, boolean][] = [
    [
      `orders in the database (${count(orders)}) = stock (${count(coupon.stock)}) - remaining in Redis (${count(after.remaining)})`,
      orders === coupon.stock - after.remaining,
    ],
    [
      `one order per user: ${count(orders)} orders from ${count(buyers)} distinct users`,
      orders === buyers,
    ],
    [
      `every 201 has its order: ${count(okAnswers)} answers, ${count(crowdOrders.length)} orders of the crowd`,
      everyOkStored && okAnswers === crowdOrders.length,
    ],
    [
      `never oversold: ${count(orders)} <= ${count(coupon.stock)}`,
      orders <= coupon.stock,
    ],
  ];
  console.log('\nInvariants:');
  for (const [text, ok] of checks) {
    console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${text}`);
  }
  return checks.every(([, ok]) => ok);
}

async function main(): Promise<number> {
  const options = parseOptions();
  const { port } = loadConfig(process.env);

  console.log('Starting the flash-sale app (Redis, database, migrations)…');
  let app: INestApplication;
  try {
    app = await createApp({ logger: demoLogger });
  } catch (error) {
    console.error(`Cannot start the app: ${(error as Error).message}`);
    return 1;
  }
  try {
    await app.listen(port);
  } catch (error) {
    const code = (error as { code?: string }).code;
    console.error(
      code === 'EADDRINUSE'
        ? `Port ${port} is in use. Pick another one: PORT=3001 npm run demo`
        : `Cannot listen on port ${port}: ${(error as Error).message}`,
    );
    await app.close();
    return 1;
  }
  const address = app.getHttpServer().address() as AddressInfo;
  const base = `http://127.0.0.1:${address.port}`;

  const stop = new AbortController();
  // Every waiting user listens for it.
  setMaxListeners(options.users + 10, stop.signal);
  let stopping: Promise<void> | undefined;
  const shutdown = () => (stopping ??= app.close());
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
    const { coupon, created } = await pickCoupon(base, options);
    console.log(
      `${created ? 'Created' : 'Using'} coupon #${coupon.id} "${coupon.name}": ` +
        `${count(coupon.remaining)} of ${count(coupon.stock)} left.`,
    );
    console.log(`\nOpen ${base}/ in a browser to watch the sale.\n`);
    if (options.delayMs > 0) {
      console.log(
        `The crowd (${count(options.users)} users) arrives in ${options.delayMs / 1_000} s…`,
      );
      await sleep(options.delayMs, stop.signal);
    }
    if (!stop.signal.aborted) {
      console.log(
        `Crowd: ${count(options.users)} users arriving over ${options.rampMs / 1_000} s, ` +
          `each buying about ${options.rate} times a second (one request at a time), for ${(options.rampMs + options.tailMs) / 1_000} s.`,
      );
      const crowd = await runCrowd(
        base,
        coupon.id,
        options,
        stop.signal,
        async (progress) => {
          const now = await api<CouponDetails>(
            base,
            `/api/coupons/${coupon.id}`,
          );
          console.log(
            `  ${progress.seconds.toFixed(1).padStart(5)} s  remaining ${count(now.remaining)} of ${count(now.stock)}, ` +
              `orders ${count(now.sold)}, requests ${count(progress.requests)}`,
          );
        },
      );
      const buyers = new Set(crowd.bought.keys()).size;
      console.log(
        `\nThe crowd sent ${count(crowd.requests)} requests in ${crowd.seconds.toFixed(1)} s ` +
          `(${count(Math.round(crowd.requests / Math.max(crowd.seconds, 0.001)))}/s).`,
      );
      console.log(`Answers: ${answerLine(crowd.answers)}.`);
      console.log(
        `Response time: median ${percentile(crowd.latencies, 0.5).toFixed(0)} ms, ` +
          `p99 ${percentile(crowd.latencies, 0.99).toFixed(0)} ms ` +
          '(purchases of one coupon queue for its lock, one at a time).',
      );
      console.log(`Users who got the coupon: ${count(buyers)}.`);
      ok = await checkInvariants(app, base, coupon, crowd);
      console.log(
        ok ? '\nAll invariants hold.' : '\nAn invariant does not hold!',
      );
    }
    if (!options.exit && !stop.signal.aborted) {
      console.log(
        `\nStill serving ${base}/ (create coupons and buy from the page). Press Ctrl-C to stop.`,
      );
      await new Promise<void>((resolve) =>
        stop.signal.addEventListener('abort', () => resolve(), { once: true }),
      );
    }
  } catch (error) {
    console.error(`The demo failed: ${(error as Error).message}`);
    ok = false;
  } finally {
    await shutdown();
  }
  return ok ? 0 : 1;
}

process.exitCode = await main();
