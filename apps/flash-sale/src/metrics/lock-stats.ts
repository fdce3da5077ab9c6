import { Injectable } from '@nestjs/common';
import { register, type MetricValue } from 'prom-client';

/** The lock figures of this instance since it started, as the page shows them. */
export interface LockSummary {
  /** Acquisitions by outcome (acquired, busy, timeout, aborted, error). */
  readonly acquisitions: Readonly<Record<string, number>>;
  /** Wait of the granted acquisitions, estimated from the histogram's buckets, ms. */
  readonly waitP50Ms: number | null;
  readonly waitP99Ms: number | null;
  /** Keys held and acquisitions waiting now. */
  readonly holds: number;
  readonly waiters: number;
  /** Holds lost while held. */
  readonly lost: number;
  /** Hand-offs by kind (local, remote). */
  readonly handoffs: Readonly<Record<string, number>>;
}

const prefix = 'distributed_lock_';

/**
 * Reads the lock module's metrics from prom-client's registry: the page and
 * `/metrics` show the same numbers.
 */
@Injectable()
export class LockStats {
  async read(): Promise<LockSummary> {
    const [acquisitions, wait, holds, waiters, lost, handoffs] =
      await Promise.all(
        [
          'acquisitions_total',
          'wait_seconds',
          'holds',
          'waiters',
          'lost_total',
          'handoffs_total',
        ].map((name) => valuesOf(prefix + name)),
      );
    const granted = wait.filter(
      (v) =>
        v.labels.outcome === 'acquired' && v.metricName?.endsWith('_bucket'),
    );
    return {
      acquisitions: sumBy(acquisitions, 'outcome'),
      waitP50Ms: quantileMs(granted, 0.5),
      waitP99Ms: quantileMs(granted, 0.99),
      holds: total(holds),
      waiters: total(waiters),
      lost: total(lost),
      handoffs: sumBy(handoffs, 'kind'),
    };
  }
}

type Value = MetricValue<string> & { metricName?: string };

async function valuesOf(name: string): Promise<Value[]> {
  const metric = register.getSingleMetric(name);
  return metric ? ((await metric.get()).values as Value[]) : [];
}

const total = (values: readonly Value[]) =>
  values.reduce((sum, v) => sum + v.value, 0);

function sumBy(
  values: readonly Value[],
  label: string,
): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const v of values) {
    const key = String(v.labels[label]);
    sums[key] = (sums[key] ?? 0) + v.value;
  }
  return sums;
}

/**
 * The `q` quantile of cumulative histogram buckets (summed over every
 * series), interpolated within its bucket as Prometheus's
 * `histogram_quantile` does; null when nothing was observed.
 */
function quantileMs(buckets: readonly Value[], q: number): number | null {
  const byBound = new Map<number, number>();
  for (const b of buckets) {
    const bound = b.labels.le === '+Inf' ? Infinity : Number(b.labels.le);
    byBound.set(bound, (byBound.get(bound) ?? 0) + b.value);
  }
  const sorted = [...byBound].toSorted(([a], [b]) => a - b);
  const count = sorted.at(-1)?.[1] ?? 0;
  if (count === 0) return null;
  const rank = q * count;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [bound, cumulative] of sorted) {
    if (cumulative >= rank) {
      // Above the highest finite bucket: that bound is the best estimate.
      if (bound === Infinity) return lowerBound * 1_000;
      const within = cumulative - lowerCount;
      const fraction = within === 0 ? 0 : (rank - lowerCount) / within;
      return (lowerBound + (bound - lowerBound) * fraction) * 1_000;
    }
    lowerBound = bound;
    lowerCount = cumulative;
  }
  return null;
}
