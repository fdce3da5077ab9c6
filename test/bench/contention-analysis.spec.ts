/**
 * C's longest wait is judged on its worst window, and the report splits that
 * wait into the time others held the lock and the time it sat free: the split
 * must add up to the wait and put each gap where it happened.
 */
import { contentionEvents as events } from './contention-events.js';
import { analyzeContention } from '../../bench/scenarios/contention-analysis.js';

describe('analyzeContention: the longest wait', () => {
  it('splits it into holds by others and hand-off gaps', () => {
    // Contender 2 waits from 1 to 20: 0 holds until 4, then 1 holds 5-12
    // (a gap of 1 ms) and 0 again 15-18 (a gap of 3), and 2 gets it at 20
    // (a gap of 2).
    const figures = analyzeContention(
      [
        events([
          [0, 0, 0, 4],
          [1, 0, 5, 12],
          [0, 4, 15, 18],
          [2, 1, 20, 21],
        ]),
      ],
      3,
      0,
      100,
    );
    expect(figures.longestWaitMs).toBe(19);
    expect(figures.longestWaitParts).toEqual({
      grantsAhead: 2,
      heldMs: 3 + 7 + 3,
      freeMs: 1 + 3 + 2,
      longestFreeMs: 3,
    });
  });

  it('counts a wait still open at the window end up to that end', () => {
    // Contender 1 waits from 2 to the end (10) while 0 holds twice.
    const figures = analyzeContention(
      [
        events(
          [
            [0, 0, 0, 6],
            [0, 6, 7, 9],
          ],
          [[1, 2]],
        ),
      ],
      2,
      0,
      10,
    );
    expect(figures.longestWaitMs).toBe(8);
    expect(figures.longestWaitParts).toEqual({
      grantsAhead: 1,
      heldMs: 4 + 2,
      freeMs: 1 + 1,
      longestFreeMs: 1,
    });
  });

  it('has nothing held and one gap for a wait on a free lock', () => {
    const figures = analyzeContention([events([[0, 0, 3, 4]])], 1, 0, 10);
    expect(figures.longestWaitParts).toEqual({
      grantsAhead: 0,
      heldMs: 0,
      freeMs: 3,
      longestFreeMs: 3,
    });
  });
});
