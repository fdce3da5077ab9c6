import { Counter, Gauge, Histogram, register } from 'prom-client';

/** How a purchase ended, as the page's charts group them. */
export const PURCHASE_OUTCOMES = [
  'created',
  'sold_out',
  'already_purchased',
  'busy',
  'error',
] as const;
export type PurchaseOutcome = (typeof PURCHASE_OUTCOMES)[number];

/** Upper bounds of the purchase-time histogram, in seconds. */
export const PURCHASE_SECONDS_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

const PURCHASES = 'flash_sale_purchases_total';
const SECONDS = 'flash_sale_purchase_seconds';
const IN_FLIGHT = 'flash_sale_purchases_in_flight';

/** The error codes that get an outcome of their own; every other answer is `error`. */
export function outcomeOf(status: number, code?: string): PurchaseOutcome {
  if (status === 201) return 'created';
  if (code === 'SOLD_OUT') return 'sold_out';
  if (code === 'ALREADY_PURCHASED') return 'already_purchased';
  if (code === 'BUSY' || status === 429) return 'busy';
  return 'error';
}

/** A metric of prom-client's global registry, created once per process (apps booted in one test process share it). */
function once<T>(name: string, create: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? create();
}

export function purchaseCounter(): Counter<'outcome'> {
  return once(PURCHASES, () => {
    const counter = new Counter({
      name: PURCHASES,
      help: 'Purchase requests (POST /api/coupon/seckill/:id) answered, by outcome',
      labelNames: ['outcome'] as const,
    });
    for (const outcome of PURCHASE_OUTCOMES) counter.labels(outcome).inc(0);
    return counter;
  });
}

export function purchaseHistogram(): Histogram<'outcome'> {
  return once(
    SECONDS,
    () =>
      new Histogram({
        name: SECONDS,
        help: 'Time to answer a purchase request, by outcome, in seconds',
        labelNames: ['outcome'] as const,
        buckets: PURCHASE_SECONDS_BUCKETS,
      }),
  );
}

/**
 * Purchases being answered now, by coupon: the coupon's queue on this
 * instance (waiting for the coupon's lock or holding it). A series is removed
 * when it drops to 0, so only coupons with buyers right now have one.
 */
export function inFlightGauge(): Gauge<'coupon'> {
  return once(
    IN_FLIGHT,
    () =>
      new Gauge({
        name: IN_FLIGHT,
        help: 'Purchase requests being answered now on this instance, by coupon id (absent when 0)',
        labelNames: ['coupon'] as const,
      }),
  );
}

/** Registers the metrics (at zero) so that the first scrape shows them. */
export function registerPurchaseMetrics(): void {
  purchaseCounter();
  purchaseHistogram();
  inFlightGauge();
}
