import { Counter, register } from 'prom-client';

/** Which side of a coupon's stock was wrong and rewritten from the database's orders. */
export type RepairedSide = 'redis' | 'database';

const METRIC = 'flash_sale_stock_repairs_total';

/**
 * The counter in prom-client's global registry, created once per process
 * (several apps booted in one test process share it, as they share the lock
 * module's metrics).
 */
function repairs(): Counter<'side'> {
  const existing = register.getSingleMetric(METRIC);
  if (existing) return existing as Counter<'side'>;
  const counter = new Counter({
    name: METRIC,
    help: 'Disagreements found between Redis, coupons.sold and the orders, each repaired from the orders',
    labelNames: ['side'] as const,
  });
  // Both series exist from the start, so a rate() sees the first repair.
  counter.labels('redis').inc(0);
  counter.labels('database').inc(0);
  return counter;
}

export function countStockRepair(side: RepairedSide): void {
  repairs().labels(side).inc();
}

/** Repairs so far, by side, as `/metrics` shows them. */
export async function stockRepairCounts(): Promise<
  Record<RepairedSide, number>
> {
  const counts: Record<RepairedSide, number> = { redis: 0, database: 0 };
  for (const value of (await repairs().get()).values) {
    counts[value.labels.side as RepairedSide] += value.value;
  }
  return counts;
}

/** Registers the counter (at zero) so that the first scrape shows it. */
export function registerStockRepairMetric(): void {
  repairs();
}
