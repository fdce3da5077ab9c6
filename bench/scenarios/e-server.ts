import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { BenchContext } from './context.js';

const run = promisify(execFile);

export interface ServerCeilingRow {
  readonly command: string;
  readonly clients: number;
  readonly requestsPerSec: number;
  readonly p50Ms: number;
}

export interface ServerCeilingResult {
  readonly requests: number;
  readonly rows: ServerCeilingRow[];
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
  const at1 = (name: string) =>
    rows.find((r) => r.clients === 1 && r.command.startsWith(name))
      ?.requestsPerSec ?? Number.NaN;
  return {
    requests,
    rows,
    twoTripCycleCeiling: 1 / (1 / at1('SET') + 1 / at1('EVALSHA')),
  };
}

export const plannedServerCeiling = 4;

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
