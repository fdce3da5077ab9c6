/**
 * J's correctness check rests on counting readers and writers at once from
 * the holds' stamps: it must catch a writer beside anyone and never invent
 * an overlap; the figures split reads from writes.
 */
import { seededRandom } from '../../bench/scenarios/contention-core.js';
import type { ContentionEvents } from '../../bench/scenarios/contention-core.js';
import {
  analyzeReadWrite,
  readersAndWriters,
} from '../../bench/scenarios/rwlock-analysis.js';

/** One process's events from [caller, wait began, acquired, release began, write?] holds. */
function events(
  holds: readonly (readonly [number, number, number, number, boolean])[],
  openWaits: readonly (readonly [number, number])[] = [],
): ContentionEvents {
  return {
    acquisitions: holds.flatMap(([who, wait, acq, rel]) => [
      who,
      wait,
      acq,
      rel,
    ]),
    openWaits: openWaits.flat(),
    modes: holds.map(([, , , , write]) => (write ? 1 : 0)),
    failures: 0,
    stragglers: 0,
  };
}

const read = (acq: number, rel: number) => ({ acq, rel, write: false });
const write = (acq: number, rel: number) => ({ acq, rel, write: true });

describe('readersAndWriters', () => {
  it('counts the most readers at once and no overlap when writers are alone', () => {
    const holds = [
      read(0, 10),
      read(1, 10),
      read(2, 10),
      write(11, 15),
      read(16, 20),
      read(17, 20),
    ];
    expect(readersAndWriters(holds)).toEqual({ maxReaders: 3, overlaps: 0 });
  });

  it('counts a writer that begins while readers hold', () => {
    expect(readersAndWriters([read(0, 10), write(5, 12)]).overlaps).toBe(1);
  });

  it('counts a reader that begins while a writer holds', () => {
    expect(
      readersAndWriters([write(0, 10), read(5, 12), read(6, 12)]).overlaps,
    ).toBe(2);
  });

  it('counts two writers at once', () => {
    expect(readersAndWriters([write(0, 10), write(9, 12)]).overlaps).toBe(1);
  });

  it('does not count a lock passed on at the moment of release as an overlap', () => {
    // Within the 50 us allowed for the processes' clocks.
    expect(
      readersAndWriters([read(0, 5), read(1, 5), write(4.97, 8), read(8, 9)])
        .overlaps,
    ).toBe(0);
  });

  it('counts zero-length holds (hold 0 ms) without inventing overlaps', () => {
    expect(readersAndWriters([write(1, 1), write(2, 2), read(3, 3)])).toEqual({
      maxReaders: 1,
      overlaps: 0,
    });
  });
});

describe('analyzeReadWrite', () => {
  it('merges the processes and splits reads from writes', () => {
    const startAt = 1_000;
    const figures = analyzeReadWrite(
      [
        events([
          [0, 1_000, 1_001, 1_003, false],
          [1, 1_000, 1_002, 1_003, false],
          [0, 1_003, 1_004, 1_005, true],
        ]),
        // Caller 2 waited from 990 (before the window): counted from its start.
        events([[2, 990, 1_010, 1_011, true]], [[3, 1_040]]),
      ],
      4,
      startAt,
      100,
    );
    expect(figures).toMatchObject({
      acquisitions: 4,
      acquisitionsPerSec: 40,
      reads: 2,
      readsPerSec: 20,
      writes: 2,
      writesPerSec: 20,
      perCaller: [2, 1, 1, 0],
      fairness: Number.POSITIVE_INFINITY,
      starved: 1,
      maxReaders: 2,
      overlaps: 0,
    });
    // The open wait of caller 3: from 1,040 to the window's end at 1,100.
    expect(figures.longestWaitMs).toBe(60);
    expect(figures.readWaitP50).toBeGreaterThanOrEqual(1);
    expect(figures.readWaitP99).toBeLessThanOrEqual(2);
    expect(figures.writeWaitP50).toBeGreaterThanOrEqual(1);
    expect(figures.writeWaitP99).toBeLessThanOrEqual(10);
  });

  it('finds a writer overlapping readers of another process', () => {
    const figures = analyzeReadWrite(
      [
        events([[0, 1_000, 1_001, 1_010, false]]),
        events([[1, 1_000, 1_005, 1_006, true]]),
      ],
      2,
      1_000,
      100,
    );
    expect(figures.overlaps).toBe(1);
  });

  it('refuses events without a mode for every acquisition', () => {
    const part = { ...events([[0, 1_000, 1_001, 1_002, false]]), modes: [] };
    expect(() => analyzeReadWrite([part], 1, 1_000, 100)).toThrow(/modes/);
  });
});

describe('seededRandom', () => {
  it('repeats its draws for a seed and stays in [0, 1)', () => {
    const a = seededRandom(7);
    const b = seededRandom(7);
    const draws = Array.from({ length: 1_000 }, () => a());
    expect(draws).toEqual(Array.from({ length: 1_000 }, () => b()));
    expect(draws.every((x) => x >= 0 && x < 1)).toBe(true);
    // About 90% below 0.9.
    const reads = draws.filter((x) => x < 0.9).length;
    expect(reads).toBeGreaterThan(850);
    expect(reads).toBeLessThan(950);
  });
});
