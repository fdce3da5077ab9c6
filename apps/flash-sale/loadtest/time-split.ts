import http from 'node:http';

/**
 * Where a purchase's time went, from the instances' own `/metrics` at the end
 * of the load: each turn of the coupon's lock (its wait and hold, the
 * purchases it sold together, the two steps under it), and the server's time
 * to answer, by outcome. Means are exact (a histogram's sum over its count);
 * the p99 is the bucket bound it falls under.
 */
export interface TimeSplitRow {
  readonly part: string;
  readonly count: number;
  readonly mean: number;
  /** The upper bound of the bucket holding the 99th percentile; null past the last bound. */
  readonly p99AtMost: number | null;
  /** What `mean` and `p99AtMost` count: milliseconds, or purchases. */
  readonly unit: 'ms' | 'purchases';
}

interface Series {
  readonly metric: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly part: string;
  /** Purchases per turn, not seconds. */
  readonly purchases?: true;
}

const PARTS: readonly Series[] = [
  {
    part: "a turn's lock wait, granted",
    metric: 'distributed_lock_wait_seconds',
    labels: { outcome: 'acquired' },
  },
  {
    part: "a turn's lock wait, stopped at the sell-out",
    metric: 'distributed_lock_wait_seconds',
    labels: { outcome: 'aborted' },
  },
  {
    part: 'lock held by a turn',
    metric: 'distributed_lock_hold_seconds',
    labels: {},
  },
  {
    part: '  purchases sold in the turn',
    metric: 'flash_sale_sale_batch_size',
    labels: {},
    purchases: true,
  },
  {
    part: '  seckill.lua',
    metric: 'flash_sale_sale_step_seconds',
    labels: { step: 'script' },
  },
  {
    part: '  database statement',
    metric: 'flash_sale_sale_step_seconds',
    labels: { step: 'database' },
  },
  {
    part: 'answered on the server, 201',
    metric: 'flash_sale_purchase_seconds',
    labels: { outcome: 'created' },
  },
  {
    part: 'answered on the server, sold out',
    metric: 'flash_sale_purchase_seconds',
    labels: { outcome: 'sold_out' },
  },
  {
    part: 'answered on the server, already bought',
    metric: 'flash_sale_purchase_seconds',
    labels: { outcome: 'already_purchased' },
  },
];

interface Histogram {
  count: number;
  sum: number;
  /** Upper bound in seconds -> cumulative count. */
  readonly buckets: Map<number, number>;
}

const LINE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

/** Adds the samples of one scrape to `into`, per part. */
function addScrape(text: string, into: Map<string, Histogram>): void {
  for (const line of text.split('\n')) {
    const match = LINE.exec(line);
    if (!match) continue;
    const [, name, labelText = '', valueText] = match;
    const labels = Object.fromEntries(
      [...labelText.matchAll(LABEL)].map(([, key, value]) => [key, value]),
    );
    for (const series of PARTS) {
      const suffix = name.slice(series.metric.length);
      if (!name.startsWith(series.metric)) continue;
      if (!['_bucket', '_sum', '_count'].includes(suffix)) continue;
      const matches = Object.entries(series.labels).every(
        ([key, value]) => labels[key] === value,
      );
      if (!matches) continue;
      const histogram = into.get(series.part) ?? {
        count: 0,
        sum: 0,
        buckets: new Map<number, number>(),
      };
      into.set(series.part, histogram);
      const value = Number(valueText);
      if (suffix === '_sum') histogram.sum += value;
      else if (suffix === '_count') histogram.count += value;
      else {
        const bound = labels.le === '+Inf' ? Infinity : Number(labels.le);
        histogram.buckets.set(
          bound,
          (histogram.buckets.get(bound) ?? 0) + value,
        );
      }
    }
  }
}

/** The 99th percentile's bucket bound, in the histogram's own unit. */
function p99Bound(histogram: Histogram): number | null {
  const wanted = histogram.count * 0.99;
  const bounds = [...histogram.buckets.keys()].toSorted((a, b) => a - b);
  for (const bound of bounds) {
    if (histogram.buckets.get(bound)! >= wanted)
      return Number.isFinite(bound) ? bound : null;
  }
  return null;
}

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = http.get(
      { host: '127.0.0.1', port, path: '/metrics', timeout: 5_000 },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve(body));
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', reject);
  });
}

/** The histograms of every part, summed over the instances that answered. */
export type TimeHistograms = ReadonlyMap<string, Histogram>;

/**
 * Scrapes every instance and sums their histograms. An instance that does
 * not answer (killed) is left out; its restarted process counts from zero.
 */
export async function scrapeTimeHistograms(
  ports: readonly number[],
): Promise<TimeHistograms> {
  const histograms = new Map<string, Histogram>();
  const scrapes = await Promise.allSettled(ports.map(scrape));
  for (const result of scrapes)
    if (result.status === 'fulfilled') addScrape(result.value, histograms);
  return histograms;
}

/**
 * What was observed between two scrapes. An instance restarted in between
 * counts from zero again, so a part that went down is read from `after` alone.
 */
export function timeSplitBetween(
  before: TimeHistograms,
  after: TimeHistograms,
): TimeSplitRow[] {
  return PARTS.flatMap(({ part, purchases }) => {
    const end = after.get(part);
    if (!end) return [];
    const start = before.get(part);
    const histogram =
      start && start.count <= end.count ? difference(end, start) : end;
    if (histogram.count === 0) return [];
    const scale = purchases ? 1 : 1_000;
    const p99 = p99Bound(histogram);
    return [
      {
        part,
        count: histogram.count,
        mean: (histogram.sum / histogram.count) * scale,
        p99AtMost: p99 === null ? null : p99 * scale,
        unit: purchases ? 'purchases' : 'ms',
      },
    ];
  });
}

function difference(end: Histogram, start: Histogram): Histogram {
  const buckets = new Map<number, number>();
  for (const [bound, value] of end.buckets)
    buckets.set(bound, value - (start.buckets.get(bound) ?? 0));
  return { count: end.count - start.count, sum: end.sum - start.sum, buckets };
}
