/**
 * A and B measure ratios between sides that take turns, each in a worker
 * process. A process that also takes turns in other groups sleeps less
 * between its turns than its partners, and on this kind of VM that alone
 * moves its round trips more than the code does: every process must belong
 * to one group only.
 */
import { fullConfig } from '../../bench/config.js';
import { uncontendedIds } from '../../bench/contenders/index.js';
import type { BenchContext } from '../../bench/scenarios/context.js';
import {
  fencedRowId,
  plannedUncontended,
  uncontendedMinimumToRaw,
  turnGroup,
  uncontendedTargetIds,
  workerName,
} from '../../bench/scenarios/uncontended.js';

describe('A and B worker processes', () => {
  it('run the turns of one group each, the raw baseline and the compared-with contender included', () => {
    const groupsOfWorker = new Map<string, Set<string>>();
    for (const id of uncontendedIds) {
      for (const each of turnGroup(id, true, 0)) {
        const worker = workerName(each, id);
        const groups = groupsOfWorker.get(worker) ?? new Set<string>();
        groups.add(id);
        groupsOfWorker.set(worker, groups);
      }
    }
    const shared = [...groupsOfWorker]
      .filter(([, groups]) => groups.size > 1)
      .map(([worker, groups]) => `${worker}: ${[...groups].join(', ')}`);
    expect(shared).toEqual([]);
  });

  it('give each side of a group a process of its own', () => {
    for (const id of uncontendedIds) {
      const group = turnGroup(id, true, 0);
      const workers = new Set(group.map((each) => workerName(each, id)));
      expect(workers.size).toBe(group.length);
    }
  });
});

describe('A and B repetitions', () => {
  const ctx = { config: fullConfig } as BenchContext;
  const { reps, targetedReps } = fullConfig.uncontended;

  it('give the rows a target judges more repetitions than the rest', () => {
    expect(targetedReps).toBeGreaterThan(reps);
    // The rows the report's targets judge, no more and no fewer.
    expect(uncontendedTargetIds.toSorted()).toEqual(
      [...Object.keys(uncontendedMinimumToRaw), fencedRowId].toSorted(),
    );
    for (const id of uncontendedTargetIds) expect(uncontendedIds).toContain(id);
  });

  it('plan the extra repetitions for the targeted rows only', () => {
    const targeted = uncontendedIds.filter((id) =>
      uncontendedTargetIds.includes(id),
    ).length;
    expect(plannedUncontended(ctx, uncontendedIds)).toBe(
      reps * (uncontendedIds.length - 1) + (targetedReps - reps) * targeted,
    );
    expect(plannedUncontended(ctx, ['raw', 'ours-service-lease'])).toBe(reps);
  });
});
