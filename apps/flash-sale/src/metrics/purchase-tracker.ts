import { Injectable } from '@nestjs/common';
import {
  PURCHASE_OUTCOMES,
  PURCHASE_SECONDS_BUCKETS,
  inFlightGauge,
  outcomeOf,
  purchaseCounter,
  purchaseHistogram,
  type PurchaseOutcome,
} from './purchase-metrics.js';

/** Time spent by the purchases of one coupon that went to its lock, cumulative. */
export interface LockTimeTotal {
  readonly count: number;
  readonly totalMs: number;
}

/** This instance's purchase figures, cumulative since it started (`/metrics` shows the same). */
export interface PurchaseFigures {
  readonly outcomes: Record<PurchaseOutcome, number>;
  /** Answers per bucket of {@link PURCHASE_SECONDS_BUCKETS} (not cumulative), the last one above them all. */
  readonly buckets: number[];
  /** Purchases being answered now, by coupon id. */
  readonly inFlight: Record<string, number>;
  /** By coupon id: purchases that went through the coupon's lock (201 or 429), and their time. */
  readonly lockTime: Record<string, LockTimeTotal>;
}

/** Coupons whose lock time is kept (the most recently bought); the page shows at most 20. */
const TRACKED_COUPONS = 50;

/**
 * Counts and times purchases (prom-client metrics of `/metrics`) and keeps,
 * per coupon, the queue now and the time spent through the lock. Answers of
 * the pre-check (sold out, already bought) never reach the lock; 201 and 429
 * did, so their time is the coupon's lock wait plus its (short) hold: the
 * closest the app can see of one coupon's lock wait, since the lock module's
 * own metrics are labelled by key template, not by coupon.
 */
@Injectable()
export class PurchaseTracker {
  private readonly lockTime = new Map<string, LockTimeTotal>();
  private readonly inFlight = new Map<string, number>();

  /** A purchase of `couponId` starts; call the returned function with its answer. */
  start(couponId: string): (status: number, code?: string) => void {
    const started = performance.now();
    this.inFlight.set(couponId, (this.inFlight.get(couponId) ?? 0) + 1);
    inFlightGauge().labels(couponId).inc();
    let ended = false;
    return (status, code) => {
      if (ended) return;
      ended = true;
      const ms = performance.now() - started;
      this.leave(couponId);
      const outcome = outcomeOf(status, code);
      purchaseCounter().labels(outcome).inc();
      purchaseHistogram()
        .labels(outcome)
        .observe(ms / 1_000);
      if (outcome === 'created' || outcome === 'busy') {
        this.addLockTime(couponId, ms);
      }
    };
  }

  async figures(): Promise<PurchaseFigures> {
    const outcomes = Object.fromEntries(
      PURCHASE_OUTCOMES.map((outcome) => [outcome, 0]),
    ) as Record<PurchaseOutcome, number>;
    for (const value of (await purchaseCounter().get()).values) {
      outcomes[value.labels.outcome as PurchaseOutcome] += value.value;
    }
    return {
      outcomes,
      buckets: await bucketCounts(),
      inFlight: Object.fromEntries(this.inFlight),
      lockTime: Object.fromEntries(this.lockTime),
    };
  }

  private leave(couponId: string): void {
    const left = (this.inFlight.get(couponId) ?? 1) - 1;
    if (left > 0) {
      this.inFlight.set(couponId, left);
      inFlightGauge().labels(couponId).dec();
    } else {
      this.inFlight.delete(couponId);
      inFlightGauge().remove(couponId);
    }
  }

  private addLockTime(couponId: string, ms: number): void {
    const before = this.lockTime.get(couponId) ?? { count: 0, totalMs: 0 };
    // Re-inserted last: the map's order is the order of the latest purchase.
    this.lockTime.delete(couponId);
    this.lockTime.set(couponId, {
      count: before.count + 1,
      totalMs: before.totalMs + ms,
    });
    if (this.lockTime.size > TRACKED_COUPONS) {
      this.lockTime.delete(this.lockTime.keys().next().value!);
    }
  }
}

/** The histogram's buckets summed over outcomes, de-cumulated. */
async function bucketCounts(): Promise<number[]> {
  const bounds = new Map<number, number>(
    [...PURCHASE_SECONDS_BUCKETS, Infinity].map((le) => [le, 0]),
  );
  for (const value of (await purchaseHistogram().get()).values) {
    const name = (value as { metricName?: string }).metricName ?? '';
    if (!name.endsWith('_bucket')) continue;
    const { le: bound } = value.labels as { le?: string | number };
    const le = bound === '+Inf' ? Infinity : Number(bound);
    bounds.set(le, (bounds.get(le) ?? 0) + value.value);
  }
  const cumulative = [...bounds]
    .toSorted(([a], [b]) => a - b)
    .map(([, n]) => n);
  return cumulative.map((n, i) => n - (i === 0 ? 0 : cumulative[i - 1]));
}
