/**
 * Lock benchmark: `npm run bench` (full, about 12 minutes) or
 * `npm run bench:smoke` (about a minute; keeps the harness working).
 *
 *   node --import @swc-node/register/esm-register bench/run.ts [--smoke] [--only A,C] [--out DIR]
 *
 * Starts its own redis-server processes on free loopback ports, runs the
 * scenarios A-H (see the report's Method section), and writes a Markdown
 * report, the raw JSON and an SVG chart of C to DIR (full: docs/benchmarks,
 * smoke: .bench-output/smoke). Exits 1 when a scenario or a contender failed,
 * never because of a speed figure.
 */
import 'reflect-metadata';
import { AsyncLocalStorage } from 'node:async_hooks';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../test/support/redis-server.js';
import { fullConfig, smokeConfig } from './config.js';
import { connectIoredis } from './contenders/clients.js';
import {
  contender,
  contenders,
  contentionIds,
  quorumIds,
  uncontendedIds,
} from './contenders/index.js';
import { installedVersion } from './contenders/versions.js';
import { Progress, formatSeconds } from './progress.js';
import {
  deploymentsTable,
  jsonName,
  renderMarkdown,
} from './report/markdown.js';
import { renderContentionSvg } from './report/svg.js';
import { checkTargets, verdict } from './report/targets.js';
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
  plannedUncontended,
  runUncontended,
  UncontendedWorkers,
} from './scenarios/uncontended.js';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const allScenarios = ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H'] as const;
type Scenario = (typeof allScenarios)[number];
const chartName = 'lock-benchmark-contention.svg';
const reportName = 'lock-benchmark.md';

function usage(): string {
  return [
    'Usage: npm run bench [-- --only A,C --out DIR]',
    '       npm run bench:smoke',
    '',
    '  --smoke       short slices, one repetition, ~20,000 soak cycles (about a minute)',
    '  --only LIST   scenarios to run, e.g. A,C (default: A,B,C,D,E,F,G,H)',
    '  --out DIR     where the report goes (default: docs/benchmarks, smoke: .bench-output/smoke)',
    '  --contenders LIST  only these contenders besides the baselines, e.g. ours-service,redlock5',
    '  --render FILE rewrite the report and chart from a JSON file of an earlier run (no benchmark)',
  ].join('\n');
}

function parseCli() {
  const { values } = parseArgs({
    options: {
      smoke: { type: 'boolean', default: false },
      only: { type: 'string' },
      out: { type: 'string' },
      render: { type: 'string' },
      contenders: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${usage()}\n`);
    process.exit(0);
  }
  const only = values.only
    ? values.only.split(',').map((s) => s.trim().toUpperCase())
    : [...allScenarios];
  const unknown = only.filter((s) => !allScenarios.includes(s as Scenario));
  if (unknown.length > 0) {
    process.stderr.write(
      `Unknown scenario(s): ${unknown.join(', ')}\n${usage()}\n`,
    );
    process.exit(2);
  }
  const smoke = values.smoke;
  const out = path.resolve(
    repoRoot,
    values.out ?? (smoke ? '.bench-output/smoke' : 'docs/benchmarks'),
  );
  const picked = values.contenders?.split(',').map((s) => s.trim());
  const unknownContenders = (picked ?? []).filter((id) => !contenders.has(id));
  if (unknownContenders.length > 0) {
    process.stderr.write(
      `Unknown contender(s): ${unknownContenders.join(', ')}; known: ${[...contenders.keys()].join(', ')}\n`,
    );
    process.exit(2);
  }
  /** The scenario's contenders, cut down to the picked ones (baselines stay). */
  const pick = (ids: readonly string[]): readonly string[] =>
    picked
      ? ids.filter(
          (id) =>
            picked.includes(id) || contenders.get(id)?.kind === 'baseline',
        )
      : ids;
  return {
    smoke,
    only: only as Scenario[],
    out,
    render: values.render,
    pick,
    contenders: values.contenders,
  };
}

/** The command line that reproduces this run. */
function benchCommand(cli: ReturnType<typeof parseCli>): string {
  const args = [
    ...(cli.only.length < allScenarios.length
      ? ['--only', cli.only.join(',')]
      : []),
    ...(cli.contenders ? ['--contenders', cli.contenders] : []),
  ];
  const script = cli.smoke ? 'bench:smoke' : 'bench';
  return `npm run ${script}${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`;
}

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
  // @DistributedLock keeps the lock scope in an AsyncLocalStorage, and once
  // one is used, Node 20 runs a hook for every promise in the process, whoever
  // creates it. Without this, the contenders that ran before the decorator's
  // first slice would run without those hooks and every later one with them.
  new AsyncLocalStorage<object>().run({}, () => undefined);
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
    D: (config.quorum.warmupMs + config.quorum.sliceMs) / 1000 + 0.2,
    E: config.server.requests / 30_000,
    F: config.flashSale.reps > 0 ? 45 : 0.1,
    G: config.soak.cycles / config.soak.checkpoints / 6_000,
    // Two sides' warm-up and slice, and opening them (a Nest context each).
    H:
      (2 * (config.deployments.warmupMs + config.deployments.sliceMs)) / 1000 +
      0.5,
  };
  const uncontendedCount = cli.pick(uncontendedIds).length;
  const planned: Record<Scenario, number> = {
    A: plannedUncontended(ctx, uncontendedCount),
    // B also counts each contender's promises per cycle, one short step each.
    B: plannedUncontended(ctx, uncontendedCount) + uncontendedCount,
    C: plannedContention(ctx, cli.pick(contentionIds).length),
    D: plannedQuorum(ctx, cli.pick(quorumIds).length),
    E: plannedServerCeiling,
    F: plannedFlashSale(ctx),
    G: plannedSoak(ctx),
    H: plannedDeployments(ctx),
  };
  for (const s of cli.only) progress.plan(planned[s], secondsEach[s]);

  const results: Partial<Record<Scenario, unknown>> = {};
  const uncontendedWorkers = new UncontendedWorkers();
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
      runUncontended(ctx, 'A', uncontendedWorkers, cli.pick(uncontendedIds)),
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

/** Writes the JSON, the chart and the Markdown report, and prints the targets. */
async function writeReport(bundle: BenchResults, out: string): Promise<void> {
  await mkdir(out, { recursive: true });
  const kinds = new Map(
    [...contenders.values()].map((c) => [c.id, c.kind] as const),
  );
  if (bundle.C) {
    await writeFile(
      path.join(out, chartName),
      renderContentionSvg(
        bundle.C,
        kinds,
        `${bundle.mode} run, ${bundle.startedAt.slice(0, 16).replace('T', ' ')} UTC, medians of ${bundle.C.reps} window(s) of ${bundle.C.windowMs} ms; ${bundle.machine.cores} cores, Redis ${bundle.machine.redis.split(' ')[0]}`,
      ),
    );
  }
  await writeFile(
    path.join(out, jsonName(bundle)),
    `${JSON.stringify(bundle, jsonReplacer, 2)}\n`,
  );
  await writeFile(
    path.join(out, reportName),
    renderMarkdown(bundle, chartName),
  );

  const checks = checkTargets(bundle);
  for (const check of checks) {
    process.stdout.write(
      `${verdict(check).replaceAll('*', '').padEnd(12)} ${check.scenario}  ${check.target}: ${check.measured}\n`,
    );
  }
  if (bundle.H) {
    process.stdout.write(
      `\nH  deployments (ours / raw on each; informational):\n${deploymentsTable(bundle.H)}\n`,
    );
  }
  process.stdout.write(
    `\nReport: ${path.relative(repoRoot, path.join(out, reportName))} (${formatSeconds(bundle.durationSec)})\n`,
  );
  if (bundle.errors.length > 0) {
    process.stdout.write(`\n${bundle.errors.length} error(s):\n`);
    for (const e of bundle.errors) process.stdout.write(`  ${e}\n`);
  }
}

/** Contender failures recorded inside the scenarios' results. */
function collectErrors(r: Partial<BenchResults>): string[] {
  const found: string[] = [];
  for (const s of ['A', 'B'] as const) {
    for (const row of r[s]?.rows ?? []) {
      if (row.error) found.push(`${s}: ${row.label}: ${row.error}`);
    }
  }
  for (const variant of r.C?.variants ?? []) {
    for (const row of variant.rows) {
      if (row.error)
        found.push(`C (${variant.label}): ${row.label}: ${row.error}`);
    }
  }
  for (const size of r.D?.sizes ?? []) {
    for (const row of size.rows) {
      if (row.error)
        found.push(`D (${size.nodes} nodes): ${row.label}: ${row.error}`);
    }
  }
  if (r.E?.error) found.push(`E: ${r.E.error}`);
  if (r.F?.status === 'failed') found.push(`F: ${r.F.message}`);
  if (r.G?.error) found.push(`G: ${r.G.error}`);
  for (const row of r.H?.rows ?? []) {
    if (row.error) found.push(`H (${row.label}): ${row.error}`);
  }
  return found;
}

/** Reads back what {@link jsonReplacer} wrote. */
function jsonReviver(_key: string, value: unknown): unknown {
  if (value === 'Infinity') return Number.POSITIVE_INFINITY;
  if (value === '-Infinity') return Number.NEGATIVE_INFINITY;
  if (value === 'NaN') return Number.NaN;
  return value;
}

/** JSON has no Infinity or NaN: write them as strings. */
function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value))
    return String(value);
  return value;
}

// Referenced so that a contender typo fails at startup, not mid-run.
for (const id of [...uncontendedIds, ...contentionIds, ...quorumIds])
  contender(id);

await main();
// Clients of peers may keep timers (refresh intervals); do not wait for them.
process.exit(process.exitCode ?? 0);
