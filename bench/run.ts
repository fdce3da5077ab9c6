/**
 * Lock benchmark: `npm run bench` (full, about 17 minutes) or
 * `npm run bench:smoke` (about a minute; keeps the harness working).
 *
 *   node --import @swc-node/register/esm-register bench/run.ts [--smoke] [--only A,C] [--out DIR]
 *
 * Starts its own redis-server processes on free loopback ports, runs the
 * scenarios A-J (see the report's Method section), and writes a Markdown
 * report, the raw JSON and an SVG chart of C to DIR (full: docs/benchmarks,
 * smoke: .bench-output/smoke), then prints the ratios and the targets. Exits
 * 1 when a scenario or a contender failed, never because of a speed figure.
 */
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../test/support/redis-server.js';
import { benchCommand, parseCli, type Scenario } from './cli.js';
import { fullConfig, smokeConfig } from './config.js';
import { connectIoredis } from './contenders/clients.js';
import {
  contender,
  contenders,
  contentionIds,
  quorumIds,
  readWriteLockIds,
  semaphoreIds,
  uncontendedIds,
} from './contenders/index.js';
import { installedVersion } from './contenders/versions.js';
import { Progress } from './progress.js';
import { collectErrors, jsonReviver, writeReport } from './report/write.js';
import type { BenchResults, MachineInfo } from './results.js';
import {
  plannedContention,
  runContentionScenario,
} from './scenarios/c-contention.js';
import type { BenchContext } from './scenarios/context.js';
import { errorText } from './scenarios/context.js';
import { plannedQuorum, runQuorum } from './scenarios/d-quorum.js';
import {
  plannedServerCeiling,
  runServerCeiling,
} from './scenarios/e-server.js';
import { plannedFlashSale, runFlashSale } from './scenarios/f-flash-sale.js';
import { plannedSoak, runSoak } from './scenarios/g-soak.js';
import {
  plannedDeployments,
  runDeployments,
} from './scenarios/h-deployments.js';
import {
  plannedSemaphore,
  runSemaphoreScenario,
} from './scenarios/i-semaphore.js';
import {
  plannedReadWrite,
  runReadWriteScenario,
} from './scenarios/j-rwlock.js';
import { plannedUncontended, runUncontended } from './scenarios/uncontended.js';
import { NamedWorkers } from './workers/pool.js';
import { withRoundTripPlacement } from './affinity.js';

function redisVersion(): string {
  try {
    return execFileSync('redis-server', ['--version'], { encoding: 'utf8' })
      .trim()
      .replace(/^Redis server /, '');
  } catch {
    return 'unknown';
  }
}

function machine(loadAtStart: number[]): MachineInfo {
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGiB: os.totalmem() / 1024 ** 3,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    redis: redisVersion(),
    loadAtStart,
    loadAtEnd: os.loadavg(),
  };
}

const packages = [
  'ioredis',
  'ioredis4',
  '@nestjs/core',
  'redlock4',
  'redlock5',
  '@sesamecare-oss/redlock',
  'redis-semaphore',
];

async function main(): Promise<void> {
  const cli = parseCli();
  if (cli.render) {
    const bundle = JSON.parse(
      await readFile(path.resolve(cli.render), 'utf8'),
      jsonReviver,
    ) as BenchResults;
    await writeReport(bundle, path.resolve(cli.render, '..'));
    return;
  }
  const config = cli.smoke ? smokeConfig : fullConfig;
  const loadAtStart = os.loadavg();
  const startedAt = new Date();
  const progress = new Progress();
  const servers: RedisServerHandle[] = [];
  const errors: string[] = [];
  const wants = (s: Scenario) => cli.only.includes(s);

  process.stderr.write(
    `Lock benchmark (${config.mode}): scenarios ${cli.only.join(', ')}; load average ${loadAtStart.map((x) => x.toFixed(2)).join(' ')} on ${os.availableParallelism()} cores\n`,
  );
  const server = await startRedisServer();
  servers.push(server);
  const admin = await connectIoredis(server.url);
  const ctx: BenchContext = {
    config,
    progress,
    server,
    admin,
    async startServers(count) {
      const started = await Promise.all(
        Array.from({ length: count }, () => startRedisServer()),
      );
      servers.push(...started);
      return started;
    },
  };

  const u = config.uncontended;
  const secondsEach: Record<Scenario, number> = {
    A: (2 * (u.warmupMs + u.sliceMs)) / 1000 + 0.3,
    B: (2 * (u.warmupMs + u.sliceMs)) / 1000 + 0.3,
    C: config.contention.windowMs / 1000 + 0.6,
    D: (2 * (config.quorum.warmupMs + config.quorum.sliceMs)) / 1000 + 0.3,
    E: config.server.requests / 30_000,
    F: config.flashSale.reps > 0 ? 45 : 0.1,
    G: config.soak.cycles / config.soak.checkpoints / 6_000,
    // Two sides' warm-up and slice, and opening them (a Nest context each).
    H:
      (2 * (config.deployments.warmupMs + config.deployments.sliceMs)) / 1000 +
      0.5,
    I: config.semaphore.windowMs / 1000 + 0.6,
    J: config.rwlock.windowMs / 1000 + 0.6,
  };
  const uncontendedPicked = cli.pick(uncontendedIds);
  const planned: Record<Scenario, number> = {
    A: plannedUncontended(ctx, uncontendedPicked),
    // B also counts each contender's promises per cycle, one short step each.
    B: plannedUncontended(ctx, uncontendedPicked) + uncontendedPicked.length,
    C: plannedContention(ctx, cli.pick(contentionIds)),
    D: plannedQuorum(ctx, cli.pick(quorumIds).length),
    E: plannedServerCeiling,
    F: plannedFlashSale(ctx),
    G: plannedSoak(ctx),
    H: plannedDeployments(ctx),
    I: plannedSemaphore(ctx, cli.pick(semaphoreIds).length),
    J: plannedReadWrite(ctx, cli.pick(readWriteLockIds).length),
  };
  for (const s of cli.only) progress.plan(planned[s], secondsEach[s]);

  const results: Partial<Record<Scenario, unknown>> = {};
  // Every contender's worker process, kept from A to B.
  const uncontendedWorkers = new NamedWorkers();
  const attempt = async <T>(name: Scenario, run: () => Promise<T>) => {
    if (!wants(name)) return;
    progress.phase(secondsEach[name]);
    try {
      results[name] = await run();
    } catch (error) {
      errors.push(`${name}: ${errorText(error)}`);
      progress.log(`${name} failed: ${errorText(error)}`);
    }
  };
  try {
    await attempt('A', () =>
      withRoundTripPlacement(server.pid(), uncontendedWorkers, () =>
        runUncontended(ctx, 'A', uncontendedWorkers, cli.pick(uncontendedIds)),
      ),
    );
    await attempt('B', () =>
      runUncontended(ctx, 'B', uncontendedWorkers, cli.pick(uncontendedIds)),
    );
    await uncontendedWorkers.stop();
    await attempt('C', () =>
      runContentionScenario(ctx, cli.pick(contentionIds)),
    );
    await attempt('D', () => runQuorum(ctx, cli.pick(quorumIds)));
    await attempt('E', () => runServerCeiling(ctx));
    await attempt('F', () => runFlashSale(ctx));
    await attempt('G', () => runSoak(ctx));
    await attempt('H', () => runDeployments(ctx));
    await attempt('I', () => runSemaphoreScenario(ctx, cli.pick(semaphoreIds)));
    await attempt('J', () =>
      runReadWriteScenario(ctx, cli.pick(readWriteLockIds)),
    );
  } finally {
    progress.finish();
    await uncontendedWorkers.stop();
    admin.disconnect();
    await Promise.all(servers.map((s) => s.stop().catch(() => undefined)));
  }

  const bundle: BenchResults = {
    mode: config.mode,
    startedAt: startedAt.toISOString(),
    durationSec: (Date.now() - startedAt.getTime()) / 1000,
    command: benchCommand(cli),
    scenarios: cli.only,
    machine: machine(loadAtStart),
    versions: Object.fromEntries(
      packages.map((name) => [name, installedVersion(name)]),
    ),
    contenders: [...contenders.values()].map(({ id, label, detail }) => ({
      id,
      label,
      detail,
    })),
    config,
    ...(results as Partial<BenchResults>),
    errors: [...errors, ...collectErrors(results as Partial<BenchResults>)],
  };

  await writeReport(bundle, cli.out);
  if (bundle.errors.length > 0) process.exitCode = 1;
}

// Referenced so that a contender typo fails at startup, not mid-run.
for (const id of [
  ...uncontendedIds,
  ...contentionIds,
  ...quorumIds,
  ...semaphoreIds,
  ...readWriteLockIds,
])
  contender(id);

await main();
// Clients of peers may keep timers (refresh intervals); do not wait for them.
process.exit(process.exitCode ?? 0);
