import type {
  LatencySummary,
  LoadTestProgress,
  LoadTestReport,
} from './load-test-report.js';

const number = (value: number) => Math.round(value).toLocaleString('en-US');
const ms = (value: number) =>
  value < 10 ? `${value.toFixed(2)} ms` : `${value.toFixed(1)} ms`;
const seconds = (valueMs: number) => `${(valueMs / 1000).toFixed(1)} s`;
const preciseSeconds = (valueMs: number | undefined) =>
  valueMs === undefined ? 'not seen' : `${(valueMs / 1000).toFixed(2)} s`;
const percent = (part: number, whole: number) =>
  whole === 0 ? '-' : `${((part * 100) / whole).toFixed(1)}%`;

/** One line of progress: what was sent, what came back, how fast, how slow. */
export function formatProgress(progress: LoadTestProgress): string {
  const latency = progress.latencyMs
    ? `p50 ${ms(progress.latencyMs.p50)} p99 ${ms(progress.latencyMs.p99)}`
    : 'p50 - p99 -';
  return (
    `[${seconds(progress.elapsedMs).padStart(7)}] ` +
    `sent ${number(progress.sent)}/${number(progress.total)} (${percent(progress.sent, progress.total)}), ` +
    `done ${number(progress.finished)}, ${number(progress.recentRequestsPerSecond)} req/s, ` +
    `201: ${number(progress.successes)}, 5xx: ${number(progress.serverErrors)}, ` +
    `errors: ${number(progress.transportErrors)}, ${latency}` +
    (progress.note ? `, ${progress.note}` : '')
  );
}

/** A readable summary of a run, for a terminal. */
export function formatReport(report: LoadTestReport): string {
  const { options, sale } = report;
  const lines: string[] = [];
  const table = (rows: string[][], alignRight: boolean[]) => {
    const widths = rows[0].map((_, column) =>
      Math.max(...rows.map((row) => row[column].length)),
    );
    for (const row of rows) {
      lines.push(
        '  ' +
          row
            .map((cell, column) =>
              alignRight[column]
                ? cell.padStart(widths[column])
                : cell.padEnd(widths[column]),
            )
            .join('  ')
            .trimEnd(),
      );
    }
  };

  lines.push(
    `Flash-sale load test: ${options.instances} instance(s), lock ${options.lock ? 'ON' : 'OFF (script only)'}, ` +
      `coupon stock ${number(options.couponStock)}, ${number(options.users)} users, ` +
      `${number(options.requests)} requests, concurrency ${number(options.concurrency)}` +
      (options.killOneAt === undefined
        ? ''
        : `, ${options.killHolder ? "the coupon lock's holder" : 'one instance'} killed at ${Math.round(options.killOneAt * 100)}%`),
    `  Redis: ${report.redis}`,
    `  Database: ${report.database}`,
    `  Setup ${seconds(report.setupMs)}, load ${seconds(report.durationMs)}` +
      (report.aborted ? ' (aborted)' : '') +
      (report.timedOut ? ' (stopped at maxDuration)' : '') +
      (report.notSent > 0
        ? `, ${number(report.notSent)} requests not sent`
        : ''),
    '',
    'Responses',
  );
  const outcomes = Object.entries(report.outcomes).toSorted(([a], [b]) =>
    a.localeCompare(b),
  );
  table(
    [
      ['outcome', 'requests', 'share'],
      ...outcomes.map(([label, n]) => [
        label,
        number(n),
        percent(n, report.finished),
      ]),
      [
        'total',
        number(report.finished),
        percent(report.finished, report.finished),
      ],
    ],
    [false, true, true],
  );
  lines.push(
    `  5xx: ${number(report.serverErrors)}, connection errors and timeouts: ${number(report.transportErrors)}`,
    '',
    `Latency (HTTP answers): ${formatLatency(report.latencyMs)}`,
    `Throughput: ${number(report.requestsPerSecond)} requests/s (${number(report.finished)} in ${seconds(report.durationMs)})`,
  );
  if (report.timeSplit.length > 0) {
    lines.push(
      '',
      "Where the time goes (the instances' /metrics, summed; p99 as its histogram bucket)",
    );
    table(
      [
        ['part', 'count', 'mean', 'p99'],
        ...report.timeSplit.map((row) => [
          row.part,
          number(row.count),
          `${row.mean.toFixed(1)}${row.unit === 'ms' ? ' ms' : ''}`,
          row.p99AtMost === null
            ? 'beyond the last bucket'
            : `<= ${number(row.p99AtMost)}${row.unit === 'ms' ? ' ms' : ''}`,
        ]),
      ],
      [false, true, true, true],
    );
  }
  lines.push('', 'Instances');
  table(
    [
      ['instance', 'port', 'sent', 'answers', '201', 'errors', 'starts'],
      ...report.instances.map((instance) => [
        String(instance.index + 1),
        String(instance.port),
        number(instance.sent),
        number(instance.responses),
        number(instance.successes),
        number(instance.errors),
        String(instance.starts),
      ]),
    ],
    [true, true, true, true, true, true, true],
  );
  if (report.crash) {
    const { crash } = report;
    lines.push(
      `  Instance ${crash.instance + 1} was killed (SIGKILL) at request ${number(crash.atRequest)}, ` +
        `${seconds(crash.killedAtMs)} into the load; ` +
        (crash.restartedAtMs === undefined
          ? `it did not come back: ${crash.restartError ?? 'unknown'}`
          : `back (reconciled) after ${seconds(crash.restartedAtMs - crash.killedAtMs)}`),
    );
  }
  if (report.holderKill) lines.push('', ...formatHolderKill(report));
  lines.push(
    '',
    'Orders',
    `  database: ${number(sale.ordersInDatabase)} orders of stock ${number(sale.initialStock)}, ` +
      `${number(sale.distinctUsersInDatabase)} distinct users, ` +
      `${number(sale.usersWithTwoOrders.length)} users with two orders`,
    `  Redis: remaining ${sale.remainingInRedis === null ? 'missing' : number(sale.remainingInRedis)}, ` +
      `${number(sale.buyersInRedis)} buyers recorded`,
    `  clients: ${number(report.successes)} successes (201) for ${number(report.successUsers)} users, ` +
      `${number(report.duplicateSuccessUsers)} users with two successes`,
    '',
    'Invariants',
  );
  for (const invariant of report.invariants) {
    lines.push(
      `  ${invariant.ok ? 'ok  ' : 'FAIL'}  ${invariant.name}: ${invariant.detail}`,
    );
  }
  lines.push(
    '',
    report.ok ? 'All invariants hold.' : 'AN INVARIANT IS BROKEN.',
  );
  return lines.join('\n');
}

export function formatLatency(latency: LatencySummary | null): string {
  if (!latency) return 'no answers';
  return (
    `p50 ${ms(latency.p50)}, p90 ${ms(latency.p90)}, p99 ${ms(latency.p99)}, ` +
    `max ${ms(latency.max)}, mean ${ms(latency.mean)}`
  );
}

/** What the kill of the lock's holder caught, and what the load saw across it. */
function formatHolderKill(report: LoadTestReport): string[] {
  const kill = report.holderKill!;
  if (!kill.caught) {
    return [
      'Kill of the lock holder',
      `  no instance was caught holding ${kill.lockKey} in ${kill.tries} tries: nothing was killed`,
    ];
  }
  const across = kill.acrossKill!;
  return [
    'Kill of the lock holder',
    `  instance ${kill.instance! + 1} (lock session ${kill.session}) held ${kill.lockKey} as ${kill.token}; ` +
      `SIGKILL at ${kill.killedAt} (try ${kill.tries})`,
    `  the lock left the dead session after ${preciseSeconds(kill.lockFreedAfterMs)}` +
      (kill.deadSessionLastHeldAfterMs !== undefined &&
      kill.deadSessionLastHeldAfterMs > (kill.lockFreedAfterMs ?? 0)
        ? `, and was handed back to waiters it had queued until ${preciseSeconds(kill.deadSessionLastHeldAfterMs)}`
        : '') +
      `; another instance sold again after ${preciseSeconds(kill.servedAgainAfterMs)}; ` +
      `longest time without a sale after the kill: ${preciseSeconds(kill.longestSaleGapMs)}`,
    `  across the kill (in flight at it or sent after): ${number(across.requests)} requests, ` +
      `${number(across.answers)} answers, 429 BUSY: ${number(across.busy)}, 503: ${number(across.unavailable)}, ` +
      `connection errors: ${number(across.connectionErrors)}`,
    `  latency across the kill: ${formatLatency(across.latencyMs)}`,
  ];
}
