import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { LockService, RedisLockBackend } from '@app/distributed-lock';
import { withCompareAndDelete } from '../contenders/raw.js';
import type { BenchContext } from './context.js';

const run = promisify(execFile);

/**
 * Our scripts told apart in SLOWLOG by their keys and arguments: the
 * uncontended release names the lock and its queue; fence and the fenced
 * acquisition the lock and its counter (fence with the token alone, the
 * acquisition with the token and the lease); the queueing acquire script 3
 * keys and the release that serves a queue 4.
 */
function ourScript(argv: readonly string[]): string {
  const secondKey = argv[4] ?? '';
  if (argv[2] === '2') {
    if (!secondKey.endsWith(':fence')) return 'release';
    // EVALSHA sha 2 lock counter token [lease]
    return argv.length === 7 ? 'fenced acquire' : 'fence';
  }
  if (argv[2] === '3') return 'acquire';
  return 'queue-serving release';
}

export interface ServerCeilingRow {
  readonly command: string;
  readonly clients: number;
  readonly requestsPerSec: number;
  readonly p50Ms: number;
}

/** Server time of one top-level command, from SLOWLOG (which logs every command at threshold 0). */
export interface ServerTimeRow {
  readonly verb: string;
  readonly calls: number;
  readonly meanUs: number;
  readonly p50Us: number;
}

export interface ServerTimeResult {
  readonly cycles: number;
  readonly rows: ServerTimeRow[];
  /** Mean server µs of one raw cycle (SET NX PX + compare-and-delete) and of one of ours. */
  readonly rawCycleUs: number;
  readonly oursCycleUs: number;
}

export interface ServerCeilingResult {
  readonly requests: number;
  readonly rows: ServerCeilingRow[];
  /** What each lock's verbs cost Redis itself, uncontended. */
  readonly serverTime?: ServerTimeResult;
  /** One SET NX PX + one EVALSHA per cycle at one connection: 1 / (1/set + 1/evalsha). */
  readonly twoTripCycleCeiling: number;
  readonly error?: string;
}

const compareAndDelete =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/** E: redis-benchmark against the same private server, the lock's two commands. */
export async function runServerCeiling(
  ctx: BenchContext,
): Promise<ServerCeilingResult> {
  const { requests } = ctx.config.server;
  const sha = (await ctx.admin.script('LOAD', compareAndDelete)) as string;
  const commands: { name: string; args: string[] }[] = [
    {
      name: 'SET key token PX 10000 NX',
      args: [
        '-r',
        '1000000',
        'SET',
        'bench:E:__rand_int__',
        'token',
        'PX',
        '10000',
        'NX',
      ],
    },
    {
      name: 'EVALSHA compare-and-delete',
      args: [
        '-r',
        '1000000',
        'EVALSHA',
        sha,
        '1',
        'bench:E:__rand_int__',
        'token',
      ],
    },
  ];
  const rows: ServerCeilingRow[] = [];
  try {
    for (const clients of [1, 50]) {
      for (const command of commands) {
        ctx.progress.step(`E: redis-benchmark ${command.name} -c ${clients}`);
        const { stdout } = await run(
          'redis-benchmark',
          [
            '-h',
            '127.0.0.1',
            '-p',
            String(ctx.server.port),
            '-n',
            String(requests),
            '-c',
            String(clients),
            '--csv',
            ...command.args,
          ],
          { timeout: 120_000 },
        );
        rows.push({ command: command.name, clients, ...parseCsv(stdout) });
        await ctx.admin.flushall();
      }
    }
  } catch (error) {
    return {
      requests,
      rows,
      twoTripCycleCeiling: Number.NaN,
      error: (error as Error).message.split('\n')[0],
    };
  }
  let serverTime: ServerTimeResult | undefined;
  try {
    ctx.progress.step('E: server time per verb (SLOWLOG)');
    serverTime = await measureServerTime(ctx, 2_000);
  } catch (error) {
    return {
      requests,
      rows,
      twoTripCycleCeiling: Number.NaN,
      error: `server time per verb: ${(error as Error).message.split('\n')[0]}`,
    };
  }
  const at1 = (name: string) =>
    rows.find((r) => r.clients === 1 && r.command.startsWith(name))
      ?.requestsPerSec ?? Number.NaN;
  return {
    requests,
    rows,
    twoTripCycleCeiling: 1 / (1 / at1('SET') + 1 / at1('EVALSHA')),
    serverTime,
  };
}

export const plannedServerCeiling = 5;

/**
 * Runs `cycles` uncontended cycles of the raw baseline and of our lock (its
 * real scripts, through LockService) on warm keys, with SLOWLOG recording every
 * command, and averages the server time of each lock's top-level commands.
 */
async function measureServerTime(
  ctx: BenchContext,
  cycles: number,
): Promise<ServerTimeResult> {
  const raw = withCompareAndDelete(new Redis(ctx.server.url));
  const oursClient = new Redis(ctx.server.url);
  const locks = new LockService({
    backend: new RedisLockBackend({ client: oursClient, ownsClient: true }),
    keyPrefix: 'lock:',
    watchdogLeaseTime: ctx.config.ttlMs,
    waitTime: 0,
    maxKeyLength: 512,
  });
  const keys = 100;
  const runCycles = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const key = `bench:E:${i % keys}`;
      const token = `token-${i}`;
      await raw.set(key, token, 'PX', ctx.config.ttlMs, 'NX');
      await raw.benchCompareAndDelete(key, token);
      // Every other hold takes its fencing token with the grant
      // (acquire-fenced.lua in place of the bare SET), as `fence: true` does.
      const handle = await locks.acquire(key, { fence: i % 2 === 0 });
      await handle.release();
    }
  };
  const admin = ctx.admin;
  const saved = (await admin.config('GET', 'slowlog-*')) as string[];
  try {
    // Warm-up: the fencing counters exist, the scripts are cached.
    await runCycles(keys * 2);
    await admin.config('SET', 'slowlog-max-len', String(cycles * 20));
    await admin.config('SET', 'slowlog-log-slower-than', '0');
    await admin.slowlog('RESET');
    await runCycles(cycles);
    await admin.config('SET', 'slowlog-log-slower-than', '-1');
    const log = (await admin.slowlog('GET', cycles * 20)) as [
      number,
      number,
      number,
      string[],
    ][];
    const byVerb = new Map<string, number[]>();
    const add = (verb: string, us: number) => {
      let list = byVerb.get(verb);
      if (!list) byVerb.set(verb, (list = []));
      list.push(us);
    };
    for (const [, , us, argv] of log) {
      const [name, first, , firstKey] = argv.map((a) => a.toLowerCase());
      if (name === 'set' && first.startsWith('bench:e:'))
        add('raw: SET NX PX', us);
      else if (name === 'evalsha' && firstKey?.startsWith('bench:e:'))
        add('raw: EVALSHA compare-and-delete', us);
      else if (name === 'set' && first.startsWith('lock:{bench:e:'))
        add('ours: SET NX PX', us);
      else if (name === 'evalsha' && firstKey?.startsWith('lock:{bench:e:'))
        add(`ours: ${ourScript(argv)} script`, us);
    }
    const order = [
      'raw: SET NX PX',
      'raw: EVALSHA compare-and-delete',
      'ours: SET NX PX',
      'ours: acquire script',
      'ours: fenced acquire script',
      'ours: release script',
      'ours: queue-serving release script',
      'ours: fence script',
    ];
    const sorted = [...byVerb].toSorted(
      ([a], [b]) => order.indexOf(a) - order.indexOf(b),
    );
    const rows = sorted.map(([verb, list]) => {
      list.sort((a, b) => a - b);
      return {
        verb,
        calls: list.length,
        meanUs: list.reduce((sum, x) => sum + x, 0) / list.length,
        p50Us: list[Math.floor(list.length / 2)],
      };
    });
    const mean = (verb: string) =>
      rows.find((row) => row.verb === verb)?.meanUs ?? Number.NaN;
    return {
      cycles,
      rows,
      rawCycleUs:
        mean('raw: SET NX PX') + mean('raw: EVALSHA compare-and-delete'),
      oursCycleUs: mean('ours: SET NX PX') + mean('ours: release script'),
    };
  } finally {
    for (let i = 0; i + 1 < saved.length; i += 2)
      await admin.config('SET', saved[i], saved[i + 1]);
    await locks.close();
    raw.disconnect();
    await admin.flushall();
  }
}

/** Reads `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...` (Redis 7). */
function parseCsv(stdout: string): { requestsPerSec: number; p50Ms: number } {
  const lines = stdout.trim().split('\n').filter(Boolean);
  const header = lines[0].split(',').map((h) => h.replaceAll('"', ''));
  const values = lines[lines.length - 1]
    .split(',')
    .map((v) => v.replaceAll('"', ''));
  const col = (name: string) => Number(values[header.indexOf(name)]);
  return { requestsPerSec: col('rps'), p50Ms: col('p50_latency_ms') };
}
