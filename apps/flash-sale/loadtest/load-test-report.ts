import { redactUrl } from '../src/common/redact-url.js';
import type { Backend } from './backends.js';
import type { LoadResult } from './drive-load.js';
import type { AppInstance } from './instances.js';
import type { Invariant, SaleState } from './invariants.js';
import type { HolderKillReport } from './kill-holder-report.js';
import type { ResolvedLoadTestOptions } from './load-test-options.js';
import type { TimeSplitRow } from './time-split.js';

export interface LoadTestProgress {
  readonly elapsedMs: number;
  readonly total: number;
  readonly sent: number;
  /** Requests answered or failed. */
  readonly finished: number;
  readonly successes: number;
  readonly serverErrors: number;
  /** Connection errors and timeouts. */
  readonly transportErrors: number;
  /** Finished requests per second since the previous progress call. */
  readonly recentRequestsPerSecond: number;
  readonly latencyMs: LatencySummary | null;
  /** What is going on besides the load ("instance 3 killed", ...), if anything. */
  readonly note?: string;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export interface InstanceReport {
  readonly index: number;
  readonly port: number;
  /** Requests sent to it. */
  readonly sent: number;
  /** HTTP answers it gave. */
  readonly responses: number;
  readonly successes: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  /** 1, or 2 after a kill and restart. */
  readonly starts: number;
}

export interface CrashReport {
  readonly instance: number;
  readonly port: number;
  /** The request whose sending triggered the kill (0-based). */
  readonly atRequest: number;
  /** Since the load started, in ms. */
  readonly killedAtMs: number;
  /** When the restarted instance answered /health again (after reconciling), since the load started. */
  readonly restartedAtMs?: number;
  /** Why the restart failed, if it did. */
  readonly restartError?: string;
}

export interface LoadTestReport {
  readonly options: ResolvedLoadTestOptions;
  readonly redis: string;
  readonly database: string;
  readonly couponId: number;
  readonly startedAt: string;
  /** Starting Redis, the database and the instances, in ms. */
  readonly setupMs: number;
  /** From the first request sent to the last one finished, in ms. */
  readonly durationMs: number;
  readonly sent: number;
  readonly finished: number;
  /** Requests never sent (the run was aborted or hit `maxDurationMs`). */
  readonly notSent: number;
  readonly aborted: boolean;
  readonly timedOut: boolean;
  /** HTTP status -> answers. */
  readonly responsesByStatus: Record<string, number>;
  /** `201`, `409 SOLD_OUT`, `429 BUSY`, `error ECONNREFUSED`, ... -> requests. */
  readonly outcomes: Record<string, number>;
  readonly successes: number;
  readonly serverErrors: number;
  readonly transportErrors: number;
  /** Of all HTTP answers (not of connection errors). */
  readonly latencyMs: LatencySummary | null;
  /** Finished requests per second of load. */
  readonly requestsPerSecond: number;
  readonly instances: InstanceReport[];
  /** Distinct users that got a 201. */
  readonly successUsers: number;
  /** Users that got more than one 201. */
  readonly duplicateSuccessUsers: number;
  readonly sale: SaleState;
  readonly crash?: CrashReport;
  /** With `killHolder`: whom the kill caught, and what the load saw across it. */
  readonly holderKill?: HolderKillReport;
  readonly invariants: Invariant[];
  /** Where the time went, from the instances' metrics (empty when none answered). */
  readonly timeSplit: TimeSplitRow[];
  /** All invariants hold (and a crashed instance came back). */
  readonly ok: boolean;
}

/** Nearest-rank percentiles. */
export function summarize(values: readonly number[]): LatencySummary | null {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).toSorted();
  const at = (share: number) =>
    sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)];
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: sorted[sorted.length - 1],
    mean: sum / sorted.length,
  };
}

function count(target: Record<string, number>, key: string): void {
  target[key] = (target[key] ?? 0) + 1;
}

export function buildReport(parts: {
  options: ResolvedLoadTestOptions;
  redis: Backend;
  database: Backend;
  couponId: number;
  startedAt: Date;
  setupMs: number;
  load: LoadResult;
  instances: AppInstance[];
  sale: SaleState;
  invariants: Invariant[];
  holderKill?: HolderKillReport;
  timeSplit: TimeSplitRow[];
}): LoadTestReport {
  const { options, load } = parts;
  const responsesByStatus: Record<string, number> = {};
  const outcomes: Record<string, number> = {};
  const perInstance = parts.instances.map(() => ({
    sent: 0,
    responses: 0,
    successes: 0,
    errors: 0,
  }));
  const latencies: number[] = [];
  const successCount = new Map<string, number>();
  let serverErrors = 0;
  let transportErrors = 0;
  for (const { instance, userId, outcome } of load.records) {
    const stats = perInstance[instance];
    stats.sent += 1;
    if (outcome.kind === 'error') {
      stats.errors += 1;
      transportErrors += 1;
      count(outcomes, `error ${outcome.error}`);
      continue;
    }
    stats.responses += 1;
    latencies.push(outcome.latencyMs);
    count(responsesByStatus, String(outcome.status));
    count(
      outcomes,
      outcome.code
        ? `${outcome.status} ${outcome.code}`
        : String(outcome.status),
    );
    if (outcome.status >= 500) serverErrors += 1;
    if (outcome.status === 201) {
      stats.successes += 1;
      successCount.set(userId, (successCount.get(userId) ?? 0) + 1);
    }
  }
  const invariants = parts.invariants;
  return {
    options: {
      ...options,
      // Without passwords: the report may be printed or stored.
      redisUrl: options.redisUrl && redactUrl(options.redisUrl),
      databaseUrl: options.databaseUrl && redactUrl(options.databaseUrl),
    },
    redis: parts.redis.label,
    database: parts.database.label,
    couponId: parts.couponId,
    startedAt: parts.startedAt.toISOString(),
    setupMs: Math.round(parts.setupMs),
    durationMs: Math.round(load.durationMs),
    sent: load.sent,
    finished: load.records.length,
    notSent: options.requests - load.sent,
    aborted: load.aborted,
    timedOut: load.timedOut,
    responsesByStatus,
    outcomes,
    successes: load.successes.length,
    serverErrors,
    transportErrors,
    latencyMs: summarize(latencies),
    requestsPerSecond:
      load.durationMs > 0 ? (load.records.length * 1000) / load.durationMs : 0,
    instances: parts.instances.map((instance, index) => ({
      index,
      port: instance.port,
      ...perInstance[index],
      starts: instance.starts,
    })),
    successUsers: successCount.size,
    duplicateSuccessUsers: [...successCount.values()].filter((n) => n > 1)
      .length,
    sale: parts.sale,
    crash: load.crash,
    holderKill: parts.holderKill,
    invariants,
    timeSplit: parts.timeSplit,
    ok: invariants.every((invariant) => invariant.ok),
  };
}
