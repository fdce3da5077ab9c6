/** Percentile (0..100) of `values` by nearest rank on a sorted copy; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).toSorted();
  return percentileSorted(sorted, p);
}

/** Percentile of already sorted values (nearest rank). */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** Median of the finite values; NaN when there is none. */
export function median(values: readonly number[]): number {
  const finite = values.filter((v) => !Number.isNaN(v));
  if (finite.length === 0) return Number.NaN;
  const sorted = finite.toSorted((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? sorted[mid]
    : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Smallest and largest of the values that are not NaN; NaN for both when there is none. */
export function extent(values: readonly number[]): readonly [number, number] {
  const kept = values.filter((v) => !Number.isNaN(v));
  if (kept.length === 0) return [Number.NaN, Number.NaN];
  return [Math.min(...kept), Math.max(...kept)];
}

/** Largest value, NaN when empty. */
export function max(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : Math.max(...values);
}

/**
 * Ratio of a contender's figure to the baseline's from the same run: the
 * median of the per-repetition ratios (each repetition's slices ran back to
 * back, so slow phases of the machine cancel out), or the ratio of the medians
 * when the repetitions cannot be paired.
 */
export function pairedRatio(
  values: readonly number[],
  baseline: readonly number[],
): number {
  if (values.length > 0 && values.length === baseline.length) {
    const ratios = values
      .map((v, i) => v / baseline[i])
      .filter((r) => Number.isFinite(r));
    if (ratios.length > 0) return median(ratios);
  }
  return median([...values]) / median([...baseline]);
}

/** Summary of a latency sample in ms. */
export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export function summarize(values: readonly number[]): LatencySummary {
  if (values.length === 0)
    return { count: 0, p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
  const sorted = Float64Array.from(values).toSorted();
  return {
    count: sorted.length,
    p50: percentileSorted(sorted, 50),
    p99: percentileSorted(sorted, 99),
    max: sorted[sorted.length - 1],
  };
}

/** Least-squares slope of `ys` over `xs` (per unit of x); 0 with fewer than 2 points. */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = Math.min(xs.length, ys.length);
  if (n < 2) return 0;
  const mx = xs.slice(0, n).reduce((a, b) => a + b, 0) / n;
  const my = ys.slice(0, n).reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** What {@link throughputRatio} reads of a row of A or B. */
export interface ThroughputRow {
  readonly id: string;
  readonly cyclesPerSec: number;
  readonly slices: readonly {
    readonly cyclesPerSec: number;
    readonly baselineCyclesPerSec?: number;
  }[];
}

/**
 * A row's throughput as a ratio to the raw baseline: the median over its
 * slices of the ratio to the raw slice run beside each (1 for the baseline).
 */
export function throughputRatio(
  row: ThroughputRow,
  base: ThroughputRow | undefined,
): number {
  if (row.id === 'raw') return 1;
  const paired = row.slices.filter(
    (slice) => slice.baselineCyclesPerSec !== undefined,
  );
  if (paired.length > 0) {
    return median(
      paired.map((slice) => slice.cyclesPerSec / slice.baselineCyclesPerSec!),
    );
  }
  // A run from before the pairing: its repetitions' ratios.
  return base
    ? pairedRatio(
        row.slices.map((slice) => slice.cyclesPerSec),
        base.slices.map((slice) => slice.cyclesPerSec),
      )
    : Number.NaN;
}
