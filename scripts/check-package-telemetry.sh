# Sourced by scripts/check-package.sh: the optional peers prom-client and
# @nestjs/terminus in the fresh ESM app, used from the installed package.
#
# telemetry.ts boots a second app with `metrics: true`, TerminusModule and a
# controller serving GET /health (LockHealthIndicator) and GET /metrics
# (prom-client's global registry). It takes a lock, then checks that the
# scrape is Prometheus text with the lock's acquisition counted under its
# name (not its key) and that terminus answers 200 with the lock up. The
# metrics being there proves the package's `import('prom-client')` resolved
# from where it is installed.

# The optional peers the ESM app installs, from this repository's versions.
telemetry_dependencies() {
  cat <<JSON
    "@nestjs/terminus": "$(repo_version @nestjs/terminus)",
    "prom-client": "$(repo_version prom-client)",
JSON
}

# Writes src/telemetry.ts into the app directory $1.
write_telemetry_check() {
  cat >"$1/src/telemetry.ts" <<'TS'
import 'reflect-metadata';
import { Controller, Get, Header, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { DistributedLockModule, LockHealthIndicator, LockService } from 'nest-distributed-lock';
import { register } from 'prom-client';

@Controller()
class OpsController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly lockHealth: LockHealthIndicator,
  ) {}

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.lockHealth.isHealthy('lock')]);
  }

  @Get('metrics')
  @Header('Content-Type', register.contentType)
  metrics() {
    return register.metrics();
  }
}

@Module({
  imports: [
    TerminusModule.forRoot(),
    DistributedLockModule.forRoot({ redis: process.env.REDIS_URL!, metrics: true }),
  ],
  controllers: [OpsController],
})
class OpsModule {}

/** `name{label="value",...} value` lines of a Prometheus text scrape. */
function samples(text: string) {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
      const labels = Object.fromEntries(
        [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
      );
      return { name: match[1], labels, value: Number(match[3]) };
    });
}

async function main(): Promise<void> {
  const app = await NestFactory.create(OpsModule, { logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  const problems: string[] = [];
  await app.get(LockService).using('order:42', () => undefined);

  const scrape = await fetch(`${url}/metrics`);
  const acquired = samples(await scrape.text()).find(
    (s) =>
      s.name === 'distributed_lock_acquisitions_total' &&
      s.labels.name === 'order:*' &&
      s.labels.outcome === 'acquired',
  );
  if (!scrape.headers.get('content-type')?.startsWith('text/plain'))
    problems.push(`/metrics answered ${scrape.headers.get('content-type')}, expected text/plain`);
  if (acquired?.value !== 1)
    problems.push(
      `/metrics counted ${acquired?.value} acquisitions of order:*, expected 1 ` +
        '(distributed_lock_acquisitions_total{name="order:*",outcome="acquired"})',
    );

  const health = await fetch(`${url}/health`);
  const body = (await health.json()) as {
    status?: string;
    info?: { lock?: { status?: string; store?: string } };
  };
  if (health.status !== 200 || body.status !== 'ok' || body.info?.lock?.status !== 'up')
    problems.push(`/health answered ${health.status} ${JSON.stringify(body)}, expected 200 with lock up`);

  await app.close();
  console.log(
    `metrics: acquisitions_total{name="order:*",outcome="acquired"} ${acquired?.value}; ` +
      `terminus /health ${health.status} ${body.status}, lock ${body.info?.lock?.status} (${body.info?.lock?.store})`,
  );
  for (const problem of problems) console.error(`problem: ${problem}`);
  if (problems.length > 0) process.exitCode = 1;
}

setTimeout(() => {
  console.error('problem: the telemetry check did not finish within 30 s');
  process.exit(1);
}, 30_000).unref();
main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
TS
}
