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

/**
 * The median of per-repetition ratios with a distribution-free confidence
 * interval: order statistics `lower = X(k)` and `upper = X(n+1-k)` of the
 * sorted ratios hold the true median with probability
 * `1 - 2 * P(B <= k-1)`, B ~ Binomial(n, 1/2), whatever the ratios'
 * distribution; k is the largest that keeps that at or above the confidence
 * asked for. With 11 repetitions and 90% that is the 3rd and 9th (93.5%).
 * Below 5 repetitions no such interval reaches 90%: the bounds are then the
 * smallest and largest ratio, and `tooFew` says so.
 */
export interface RatioInterval {
  readonly median: number;
  readonly lower: number;
  readonly upper: number;
  /** Repetitions behind it (ratios that are not NaN). */
  readonly n: number;
  /** Probability that [lower, upper] holds the true median; NaN when tooFew. */
  readonly coverage: number;
  readonly tooFew: boolean;
}

/** Fewer repetitions than this give no interval at 90%: see {@link RatioInterval}. */
export const fewestRepetitionsForInterval = 5;

/** P(B <= j) for B ~ Binomial(n, 1/2), for j = 0..n (in log space: no underflow for large n). */
function halfBinomialCdf(n: number): number[] {
  const cdf: number[] = [];
  let logChoose = 0;
  let sum = 0;
  for (let j = 0; j <= n; j++) {
    if (j > 0) logChoose += Math.log(n - j + 1) - Math.log(j);
    sum += Math.exp(logChoose - n * Math.LN2);
    cdf.push(Math.min(1, sum));
  }
  return cdf;
}

/** See {@link RatioInterval}; `confidence` is the least coverage wanted (0.9 by default). */
export function medianInterval(
  values: readonly number[],
  confidence = 0.9,
): RatioInterval {
  const sorted = values
    .filter((v) => !Number.isNaN(v))
    .toSorted((a, b) => a - b);
  const n = sorted.length;
  const center = median(sorted);
  if (n < fewestRepetitionsForInterval) {
    return {
      median: center,
      lower: n > 0 ? sorted[0] : Number.NaN,
      upper: n > 0 ? sorted[n - 1] : Number.NaN,
      n,
      coverage: Number.NaN,
      tooFew: true,
    };
  }
  const cdf = halfBinomialCdf(n);
  // k = 1 (min..max) covers 1 - 2^(1-n) >= 90% from n = 5 on.
  let k = 1;
  while (k + 1 <= Math.floor((n + 1) / 2) && 1 - 2 * cdf[k] >= confidence)
    k += 1;
  return {
    median: center,
    lower: sorted[k - 1],
    upper: sorted[n - k],
    n,
    coverage: 1 - 2 * cdf[k - 1],
    tooFew: false,
  };
}

/** What {@link throughputInterval} reads of a row of A or B. */
export interface ThroughputRow {
  readonly id: string;
  readonly cyclesPerSec: number;
  readonly slices: readonly {
    readonly cyclesPerSec: number;
    readonly baselineCyclesPerSec?: number;
    readonly referenceCyclesPerSec?: number;
  }[];
}

/**
 * A row's throughput as a ratio to the raw baseline: the per-repetition
 * ratios to the raw turns taken beside each slice, with their interval
 * (exactly 1 for the baseline itself).
 */
export function throughputInterval(
  row: ThroughputRow,
  base: ThroughputRow | undefined,
): RatioInterval {
  if (row.id === 'raw') return medianInterval(row.slices.map(() => 1));
  const paired = row.slices.filter(
    (slice) => slice.baselineCyclesPerSec !== undefined,
  );
  if (paired.length > 0) {
    return medianInterval(
      paired.map((slice) => slice.cyclesPerSec / slice.baselineCyclesPerSec!),
    );
  }
  // A run from before the pairing: its repetitions' ratios.
  const baseSlices = base?.slices ?? [];
  return medianInterval(
    row.slices.length === baseSlices.length
      ? row.slices.map((s, i) => s.cyclesPerSec / baseSlices[i].cyclesPerSec)
      : [],
  );
}

/**
 * A row's throughput as a ratio to the contender it is compared with (the
 * fenced cycle to the unfenced one), from the turns both took in the same
 * repetition; undefined for rows without one.
 */
export function referenceInterval(
  row: ThroughputRow,
): RatioInterval | undefined {
  const paired = row.slices.filter(
    (slice) => slice.referenceCyclesPerSec !== undefined,
  );
  if (paired.length === 0) return undefined;
  return medianInterval(
    paired.map((slice) => slice.cyclesPerSec / slice.referenceCyclesPerSec!),
  );
}

/** Ratios `values[i] / bases[i]` of the repetitions both have (keyed by repetition). */
export function perRepetitionRatios(
  values: ReadonlyMap<number, number>,
  bases: ReadonlyMap<number, number>,
): number[] {
  const ratios: number[] = [];
  for (const [rep, value] of values) {
    const base = bases.get(rep);
    if (base !== undefined) ratios.push(value / base);
  }
  return ratios;
}
