import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median } from '../stats.js';
import { errorDetail, errorText, type BenchContext } from './context.js';

/**
 * F's plug-in point: the flash-sale app's load tool. When this file exists
 * and exports `runLoadTest(options)` (the contract below, checked at run
 * time), F runs it; until then F is reported as pending. Imported dynamically
 * so that the benchmark builds and runs whether or not the app has it.
 */
export const flashSaleLoadTool = 'apps/flash-sale/loadtest/run-load-test.ts';

/** The options F passes (a subset of the tool's). */
export interface FlashSaleLoadOptions {
  readonly instances: number;
  /** true: the sale as shipped (per-coupon lock); false: the same sale with the Redis script alone. */
  readonly lock: boolean;
  readonly requests: number;
  readonly concurrency: number;
  readonly users: number;
  readonly couponStock: number;
  readonly maxDurationMs: number;
}

/** The fields of the tool's report that F reads. */
export interface FlashSaleLoadReport {
  readonly requestsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number } | null;
  readonly responsesByStatus: Record<string, number>;
  readonly durationMs: number;
  readonly transportErrors: number;
  readonly serverErrors: number;
  /** The sale's invariants held. */
  readonly ok: boolean;
}

export interface FlashSaleRun {
  readonly lock: boolean;
  readonly requestsPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly statuses: Record<string, number>;
  readonly errors: number;
  readonly invariantsHeld: boolean;
}

export interface FlashSaleResult {
  readonly status: 'pending' | 'skipped' | 'ran' | 'failed';
  readonly message: string;
  /** A failure's cause beyond its first line: an app instance's last lines, say. */
  readonly detail?: string;
  readonly options?: Omit<FlashSaleLoadOptions, 'lock'>;
  readonly runs?: FlashSaleRun[];
  readonly lockRequestsPerSec?: number;
  readonly scriptOnlyRequestsPerSec?: number;
  readonly lockP50Ms?: number;
  readonly scriptOnlyP50Ms?: number;
  readonly lockP99Ms?: number;
  readonly scriptOnlyP99Ms?: number;
}

export const pendingMessage =
  'pending: apps/flash-sale load tool not available';

export const smokeSkipMessage =
  'skipped in smoke mode: every run starts 3 app instances and a database (30-50 s); `npm run bench -- --only F` runs it';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

export function flashSaleAvailable(): boolean {
  return existsSync(`${repoRoot}${flashSaleLoadTool}`);
}

export function plannedFlashSale(ctx: BenchContext): number {
  return flashSaleAvailable() && ctx.config.flashSale.reps > 0
    ? ctx.config.flashSale.reps * 2
    : 1;
}

type RunLoadTest = (options: FlashSaleLoadOptions) => Promise<unknown>;

function checkReport(value: unknown): FlashSaleLoadReport {
  const report = value as Partial<FlashSaleLoadReport> | null;
  const problems: string[] = [];
  if (typeof report?.requestsPerSecond !== 'number')
    problems.push('requestsPerSecond');
  if (report?.latencyMs !== null && typeof report?.latencyMs?.p99 !== 'number')
    problems.push('latencyMs.p99');
  if (typeof report?.ok !== 'boolean') problems.push('ok');
  if (typeof report?.responsesByStatus !== 'object')
    problems.push('responsesByStatus');
  if (problems.length > 0) {
    throw new Error(
      `${flashSaleLoadTool}: the report of runLoadTest() lacks ${problems.join(', ')}`,
    );
  }
  return report as FlashSaleLoadReport;
}

/**
 * F: the flash-sale app on 3 instances, the per-coupon lock against the same
 * sale with the Redis script alone, alternating (lock first, then script
 * first, ...) so that a drift of the machine hits both.
 */
export async function runFlashSale(
  ctx: BenchContext,
): Promise<FlashSaleResult> {
  const { reps, ...load } = ctx.config.flashSale;
  if (!flashSaleAvailable()) {
    ctx.progress.step('F: flash-sale');
    ctx.progress.log(`F: ${pendingMessage} (expected ${flashSaleLoadTool})`);
    return { status: 'pending', message: pendingMessage };
  }
  if (reps === 0) {
    ctx.progress.step('F: flash-sale');
    ctx.progress.log(`F: ${smokeSkipMessage}`);
    return { status: 'skipped', message: smokeSkipMessage };
  }
  try {
    const tool = (await import(
      pathToFileURL(`${repoRoot}${flashSaleLoadTool}`).href
    )) as { runLoadTest?: RunLoadTest };
    if (typeof tool.runLoadTest !== 'function') {
      throw new Error(`${flashSaleLoadTool} does not export runLoadTest`);
    }
    const runs: FlashSaleRun[] = [];
    for (let rep = 0; rep < reps; rep++) {
      const order = rep % 2 === 0 ? [true, false] : [false, true];
      for (const lock of order) {
        ctx.progress.step(
          `F: flash-sale, ${lock ? 'per-coupon lock' : 'script alone'} (rep ${rep + 1}/${reps})`,
        );
        const report = checkReport(await tool.runLoadTest({ ...load, lock }));
        runs.push({
          lock,
          requestsPerSec: report.requestsPerSecond,
          p50Ms: report.latencyMs?.p50 ?? Number.NaN,
          p99Ms: report.latencyMs?.p99 ?? Number.NaN,
          statuses: report.responsesByStatus,
          errors: (report.transportErrors ?? 0) + (report.serverErrors ?? 0),
          invariantsHeld: report.ok,
        });
      }
    }
    const pick = (lock: boolean, f: (r: FlashSaleRun) => number) =>
      median(runs.filter((r) => r.lock === lock).map(f));
    return {
      status: 'ran',
      message: 'ran',
      options: load,
      runs,
      lockRequestsPerSec: pick(true, (r) => r.requestsPerSec),
      scriptOnlyRequestsPerSec: pick(false, (r) => r.requestsPerSec),
      lockP50Ms: pick(true, (r) => r.p50Ms),
      scriptOnlyP50Ms: pick(false, (r) => r.p50Ms),
      lockP99Ms: pick(true, (r) => r.p99Ms),
      scriptOnlyP99Ms: pick(false, (r) => r.p99Ms),
    };
  } catch (error) {
    const detail = errorDetail(error);
    ctx.progress.log(
      `F failed: ${errorText(error)}${detail ? `\n${detail}` : ''}`,
    );
    return { status: 'failed', message: errorText(error), detail };
  }
}
