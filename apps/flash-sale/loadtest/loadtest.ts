/**
 * `npm run loadtest -- [options]`: a flash sale against several app instances
 * (separate OS processes sharing one Redis and one database), then a check of
 * the invariants. Exits 0 when they hold, 1 when one is broken, 2 on bad
 * options or a failed setup, 130 when interrupted. See --help.
 */
import { parseArgs } from 'node:util';
import { formatProgress, formatReport } from './report.js';
import {
  LoadTestOptionsError,
  runLoadTest,
  type LoadTestOptions,
} from './run-load-test.js';

const HELP = `Usage: npm run loadtest -- [options]

Starts N flash-sale instances as separate processes on their own ports, sharing
one Redis and one database, sells one coupon to many users at once, and checks
that orders = initial stock - remaining, that no user has two orders and that
every 201 a client saw is in the database.

  --coupon-stock N      units on sale (default 100)
  --users N             distinct buyers (default 2000)
  --requests N          purchase requests in total (default 10000)
  --concurrency N       requests in flight at once, over all instances (default 100)
  --instances N         app instances (default 3)
  --no-lock             run the sale without the coupon lock (SECKILL_LOCK=off)
  --kill-one-at F       SIGKILL the last instance once this share of requests
                        was sent (0 < F < 1), then restart it on its port
  --kill-holder         SIGKILL the instance that holds the coupon's lock
                        instead (frozen with SIGSTOP, checked in Redis, else
                        thawed and tried again), at --kill-one-at (default
                        0.25); restart it once the lock left its session.
                        Reports the answers and latency across the kill
  --restart-delay MS    pause before that restart (default 1000)
  --redis-url URL       Redis to use (default: a private redis-server)
  --database-url URL    PostgreSQL to use (default: the embedded PGlite server,
                        started as its own process on a temporary directory)
  --from-build          run dist/apps/flash-sale (npm run build:app) instead of the sources
  --base-port N         instance ports N, N+1, ... (default: free ports)
  --request-timeout MS  a request without an answer after this fails (default 15000)
  --max-duration S      stop sending after this many seconds (default 300)
  --seckill-wait-ms MS  SECKILL_WAIT_MS of the instances (default: the app's, 10000)
  --session-ttl-ms MS   SECKILL_SESSION_TTL_MS of the instances: how soon a dead
                        instance's locks are free (default: the app's, 5000)
  --batch-max N         SECKILL_BATCH_MAX of the instances: most purchases sold
                        in one turn of the coupon's lock (default: the app's,
                        64; 1: a turn per purchase)
  --free-on-disconnect  SECKILL_FREE_ON_DISCONNECT=on: a dead instance's locks go
                        as soon as Redis sees its connection close
  --seed N              seed of the order in which users send (default 1)
  --warmup N            first send N requests for another coupon (stock N/20),
                        left out of the report, as instances that served
                        traffic before the sale would be (default 0)
  --json                print the report as JSON instead of a table
  --quiet               no progress on stderr
  --verbose             also show the instances' logs on stderr
  -h, --help            this text
`;

function fail(message: string): never {
  process.stderr.write(`loadtest: ${message}\n\n${HELP}`);
  process.exit(2);
}

let parsed: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    options: {
      'coupon-stock': { type: 'string' },
      users: { type: 'string' },
      requests: { type: 'string' },
      concurrency: { type: 'string' },
      instances: { type: 'string' },
      'no-lock': { type: 'boolean', default: false },
      'kill-one-at': { type: 'string' },
      'kill-holder': { type: 'boolean', default: false },
      'restart-delay': { type: 'string' },
      'redis-url': { type: 'string' },
      'database-url': { type: 'string' },
      'from-build': { type: 'boolean', default: false },
      'base-port': { type: 'string' },
      'request-timeout': { type: 'string' },
      'max-duration': { type: 'string' },
      'seckill-wait-ms': { type: 'string' },
      'session-ttl-ms': { type: 'string' },
      'batch-max': { type: 'string' },
      'free-on-disconnect': { type: 'boolean', default: false },
      seed: { type: 'string' },
      warmup: { type: 'string' },
      json: { type: 'boolean', default: false },
      quiet: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: false,
    strict: true,
  });
}
try {
  parsed = parse();
} catch (error) {
  fail((error as Error).message);
}
const { values } = parsed;
if (values.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

const toNumber = (name: string, value: string | undefined) => {
  if (value === undefined) return undefined;
  const result = Number(value);
  if (value.trim() === '' || !Number.isFinite(result)) {
    fail(`--${name} must be a number, got ${JSON.stringify(value)}`);
  }
  return result;
};
const maxDuration = toNumber('max-duration', values['max-duration']);

const controller = new AbortController();
let interrupts = 0;
const onSignal = (signal: string) => {
  interrupts += 1;
  if (interrupts > 1) process.exit(130);
  process.stderr.write(
    `\n${signal}: stopping the load, then checking and cleaning up (again to quit at once)\n`,
  );
  controller.abort();
};
process.on('SIGINT', () => onSignal('SIGINT'));
process.on('SIGTERM', () => onSignal('SIGTERM'));

const tty = process.stderr.isTTY === true;
const quiet = values.quiet;
let progressShown = false;
const options: LoadTestOptions = {
  couponStock: toNumber('coupon-stock', values['coupon-stock']),
  users: toNumber('users', values.users),
  requests: toNumber('requests', values.requests),
  concurrency: toNumber('concurrency', values.concurrency),
  instances: toNumber('instances', values.instances),
  lock: !values['no-lock'],
  killOneAt: toNumber('kill-one-at', values['kill-one-at']),
  killHolder: values['kill-holder'],
  restartDelayMs: toNumber('restart-delay', values['restart-delay']),
  redisUrl: values['redis-url'],
  databaseUrl: values['database-url'],
  fromBuild: values['from-build'],
  basePort: toNumber('base-port', values['base-port']),
  requestTimeoutMs: toNumber('request-timeout', values['request-timeout']),
  maxDurationMs: maxDuration === undefined ? undefined : maxDuration * 1000,
  seckillWaitMs: toNumber('seckill-wait-ms', values['seckill-wait-ms']),
  seckillSessionTtlMs: toNumber('session-ttl-ms', values['session-ttl-ms']),
  seckillBatchMax: toNumber('batch-max', values['batch-max']),
  freeOnDisconnect: values['free-on-disconnect'],
  seed: toNumber('seed', values.seed),
  warmup: toNumber('warmup', values.warmup),
  // A carriage-return line on a terminal, a line per second otherwise.
  progressIntervalMs: tty ? 250 : 1_000,
  signal: controller.signal,
  onProgress: quiet
    ? undefined
    : (progress) => {
        const line = formatProgress(progress);
        if (tty) {
          process.stderr.write(`\r\x1b[2K${line}`);
          progressShown = true;
        } else {
          process.stderr.write(`${line}\n`);
        }
      },
  onEvent: quiet
    ? undefined
    : (message) => {
        if (progressShown) {
          process.stderr.write('\n');
          progressShown = false;
        }
        process.stderr.write(`loadtest: ${message}\n`);
      },
  onInstanceLog: values.verbose
    ? (instance, line) =>
        process.stderr.write(`[instance ${instance + 1}] ${line}\n`)
    : undefined,
};

try {
  const report = await runLoadTest(options);
  if (progressShown) process.stderr.write('\n');
  process.stdout.write(
    values.json
      ? `${JSON.stringify(report, null, 2)}\n`
      : `\n${formatReport(report)}\n`,
  );
  // 1 when an invariant broke; 130 when interrupted (what was sent still checked out).
  process.exitCode = !report.ok ? 1 : report.aborted ? 130 : 0;
} catch (error) {
  if (progressShown) process.stderr.write('\n');
  if (error instanceof LoadTestOptionsError) fail(error.message);
  process.stderr.write(`loadtest: ${(error as Error).message}\n`);
  process.exitCode = 2;
}

// Everything was closed; should a stray handle keep the process alive, do not hang.
setTimeout(() => process.exit(), 5_000).unref();
