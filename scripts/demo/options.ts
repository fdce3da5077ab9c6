import { parseArgs } from 'node:util';

export const USAGE = `Usage: npm run demo -- [options]

  --instances N  app instances, each its own process on its own port (default 3)
  --users N      simulated users (default 200)
  --rate R       requests per second per user (default 5)
  --seconds S    how long users keep arriving (default 8); they keep trying 2 s more
  --stock N      stock of the coupon the demo creates (default 20)
  --delay S      seconds to wait before the crowd arrives (default 5; 0 with --exit)
  --kill-at S    SIGKILL the last instance S seconds into the crowd (default: never;
                 the page's Kill buttons do the same by hand)
  --exit         stop after the summary instead of serving the page until Ctrl-C

Environment: PORT (first instance's port, default 3000; the others follow),
REDIS_URL and DATABASE_URL (default: a private redis-server and the embedded
database, both started for the demo), ADMIN_TOKEN (default: a random one,
printed), and the app's other variables (see apps/flash-sale/README.md).`;

export interface DemoOptions {
  readonly instances: number;
  readonly users: number;
  readonly rate: number;
  readonly rampMs: number;
  readonly tailMs: number;
  readonly stock: number;
  readonly delayMs: number;
  /** Ms into the crowd at which the last instance is killed; undefined: never. */
  readonly killAtMs?: number;
  readonly exit: boolean;
}

function usageError(message: string): never {
  console.error(`${message}\n`);
  console.error(USAGE);
  process.exit(2);
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
    usageError(`--${name} must be a number from ${min} to ${max}`);
  }
  return parsed;
}

function parseDemoArgs() {
  return parseArgs({
    options: {
      instances: { type: 'string' },
      users: { type: 'string' },
      rate: { type: 'string' },
      seconds: { type: 'string' },
      stock: { type: 'string' },
      delay: { type: 'string' },
      'kill-at': { type: 'string' },
      exit: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

/** The demo's options from the command line (exits with the usage on a mistake). */
export function parseDemoOptions(): DemoOptions {
  let parsed: ReturnType<typeof parseDemoArgs>;
  try {
    parsed = parseDemoArgs();
  } catch (error) {
    usageError((error as Error).message);
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const killAt = values['kill-at'];
  return {
    instances: Math.round(numberOption('instances', values.instances, 3, 1, 8)),
    users: Math.round(numberOption('users', values.users, 200, 1, 5_000)),
    rate: numberOption('rate', values.rate, 5, 0.1, 50),
    rampMs: numberOption('seconds', values.seconds, 8, 0, 120) * 1_000,
    tailMs: 2_000,
    stock: Math.round(numberOption('stock', values.stock, 20, 1, 1_000_000)),
    delayMs:
      numberOption('delay', values.delay, values.exit ? 0 : 5, 0, 600) * 1_000,
    killAtMs:
      killAt === undefined
        ? undefined
        : numberOption('kill-at', killAt, 0, 0, 600) * 1_000,
    exit: values.exit,
  };
}
