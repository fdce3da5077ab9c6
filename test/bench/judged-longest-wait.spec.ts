/**
 * C's longest-wait target judges the 90th-percentile window, not the worst:
 * one stalled window of 35 must not decide it, four must.
 */
import { judgedLongestWait } from '../../bench/report/targets.js';
import type { ContentionRow } from '../../bench/scenarios/c-contention.js';

function rowWithWaits(waits: readonly number[]): ContentionRow {
  return {
    windows: waits.map((longestWaitMs) => ({ longestWaitMs })),
  } as unknown as ContentionRow;
}

describe('judgedLongestWait', () => {
  it('takes the 4th longest of 35 windows, so up to three stalled windows do not decide', () => {
    const waits = Array.from({ length: 35 }, (_, i) => 20 + (i % 10));
    waits[3] = 101;
    waits[17] = 88;
    waits[30] = 76;
    expect(judgedLongestWait(rowWithWaits(waits))).toBe(29);
    waits[9] = 55;
    expect(judgedLongestWait(rowWithWaits(waits))).toBe(55);
  });

  it('takes the longest of a few windows (3 repetitions of a peer, a smoke run)', () => {
    expect(judgedLongestWait(rowWithWaits([12, 61, 30]))).toBe(61);
  });
});
