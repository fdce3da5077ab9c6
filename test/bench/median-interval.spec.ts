/**
 * The benchmark's verdicts rest on this interval: a target on a ratio is met
 * only when the interval's far bound meets it.
 */
import { medianInterval } from '../../bench/stats.js';

/** 1..n, shuffled: the interval must not depend on the order of repetitions. */
function ranks(n: number): number[] {
  const values = Array.from({ length: n }, (_, i) => i + 1);
  return values.map((_, i) => values[(i * 7) % n]);
}

describe('medianInterval', () => {
  it.each([
    // n, k-th smallest, k-th largest (binomial coverage >= 90%)
    [5, 1, 5],
    [9, 2, 8],
    [11, 3, 9],
    [20, 6, 15],
    [50, 19, 32],
  ])(
    '%i repetitions: the %i-th smallest to the %i-th largest',
    (n, lower, upper) => {
      const interval = medianInterval(ranks(n));
      expect(interval.tooFew).toBe(false);
      expect([interval.lower, interval.upper]).toEqual([lower, upper]);
      expect(interval.coverage).toBeGreaterThanOrEqual(0.9);
    },
  );

  it('takes the widest interval that still covers 90%, not a narrower one', () => {
    // With 11 values, the 4th..8th would cover only 77%.
    const interval = medianInterval(ranks(11));
    expect(interval.coverage).toBeCloseTo(0.9346, 3);
  });

  it('says "too few" below 5 repetitions and falls back to min..max', () => {
    const interval = medianInterval([1.2, 0.8, 1.0]);
    expect(interval).toMatchObject({
      tooFew: true,
      lower: 0.8,
      upper: 1.2,
      median: 1.0,
    });
  });

  it('ignores repetitions without a figure', () => {
    const interval = medianInterval([1, Number.NaN, 2, 3, 4, 5]);
    expect(interval.n).toBe(5);
    expect([interval.lower, interval.upper]).toEqual([1, 5]);
  });
});
