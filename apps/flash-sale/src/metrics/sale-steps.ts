import { Histogram, register } from 'prom-client';
import { PURCHASE_SECONDS_BUCKETS } from './purchase-metrics.js';

/**
 * The two steps of a sale under the coupon's lock: `script` (seckill.lua,
 * until it took a unit or answered) and `database` (the order's transaction).
 * With the lock's wait and hold times they show where a purchase's time goes.
 */
export type SaleStep = 'script' | 'database';

const METRIC = 'flash_sale_sale_step_seconds';

/** The histogram in prom-client's global registry, created once per process. */
function steps(): Histogram<'step'> {
  const existing = register.getSingleMetric(METRIC);
  if (existing) return existing as Histogram<'step'>;
  return new Histogram({
    name: METRIC,
    help: 'Time of each step of a sale under the coupon lock (script, database), in seconds',
    labelNames: ['step'] as const,
    buckets: PURCHASE_SECONDS_BUCKETS,
  });
}

/** Runs `work` and records its time as `step`, whether it succeeds or throws. */
export async function timeSaleStep<T>(
  step: SaleStep,
  work: () => Promise<T>,
): Promise<T> {
  const startedAt = performance.now();
  try {
    return await work();
  } finally {
    steps()
      .labels(step)
      .observe((performance.now() - startedAt) / 1_000);
  }
}

/** Registers the histogram so that the first scrape shows it. */
export function registerSaleStepMetric(): void {
  steps();
}
