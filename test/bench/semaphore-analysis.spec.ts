/**
 * I's correctness check rests on counting holders at once from the holds'
 * stamps: it must catch an overbooking and never invent one.
 */
import { contentionEvents as events } from './contention-events.js';
import {
  analyzeSemaphore,
  holdersAtOnce,
} from '../../bench/scenarios/semaphore-analysis.js';

describe('holdersAtOnce', () => {
  it('counts the most holds that overlap', () => {
    const holds = [
      { acq: 0, rel: 10 },
      { acq: 1, rel: 10 },
      { acq: 2, rel: 10 },
      { acq: 3, rel: 4 },
      { acq: 5, rel: 6 },
    ];
    expect(holdersAtOnce(holds, 4)).toEqual({ maxHolders: 4, overbooked: 0 });
  });

  it('reports every acquisition that made more holders than the limit', () => {
    const holds = Array.from({ length: 6 }, (_, i) => ({ acq: i, rel: 100 }));
    expect(holdersAtOnce(holds, 4)).toEqual({ maxHolders: 6, overbooked: 2 });
  });

  it('does not count a permit passed on at the moment of release as an overlap', () => {
    // Four holders; a fifth acquires just as one of them begins releasing
    // (within the 50 us allowed for the processes' clocks).
    const holds = [
      { acq: 0, rel: 5 },
      { acq: 0, rel: 10 },
      { acq: 0, rel: 10 },
      { acq: 0, rel: 10 },
      { acq: 4.97, rel: 8 },
    ];
    expect(holdersAtOnce(holds, 4).overbooked).toBe(0);
  });

  it('counts zero-length holds (hold 0 ms) as holders', () => {
    const holds = Array.from({ length: 5 }, () => ({ acq: 1, rel: 1 }));
    expect(holdersAtOnce(holds, 4).maxHolders).toBe(5);
  });
});

describe('analyzeSemaphore', () => {
  it('merges the processes and measures waits, fairness and holders', () => {
    const startAt = 1_000;
    const figures = analyzeSemaphore(
      [
        events([
          [0, 1_000, 1_001, 1_002],
          [1, 1_000, 1_001, 1_003],
          [0, 1_002, 1_004, 1_005],
        ]),
        // Caller 2 waited from 990 (before the window): counted from its start.
        events([[2, 990, 1_010, 1_011]], [[3, 1_050]]),
      ],
      4,
      2,
      startAt,
      100,
    );
    expect(figures).toMatchObject({
      acquisitions: 4,
      acquisitionsPerSec: 40,
      perCaller: [2, 1, 1, 0],
      fairness: Number.POSITIVE_INFINITY,
      starved: 1,
      maxHolders: 2,
      overbooked: 0,
    });
    // The open wait of caller 3: from 1,050 to the window's end at 1,100.
    expect(figures.longestWaitMs).toBe(50);
    expect(figures.waitP50).toBeGreaterThanOrEqual(1);
    expect(figures.waitP50).toBeLessThanOrEqual(2);
  });
});
