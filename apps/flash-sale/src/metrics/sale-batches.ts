import { Histogram, register } from 'prom-client';

const METRIC = 'flash_sale_sale_batch_size';

/** Purchases sold per turn of a coupon's lock. */
function batches(): Histogram {
  const existing = register.getSingleMetric(METRIC);
  if (existing) return existing as Histogram;
  return new Histogram({
    name: METRIC,
    help: 'Purchases sold together in one turn of a coupon lock (one seckill.lua call, one statement)',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
  });
}

/** Records a batch of `size` purchases. */
export function observeSaleBatch(size: number): void {
  batches().observe(size);
}
