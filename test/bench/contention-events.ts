import type { ContentionEvents } from '../../bench/scenarios/contention-core.js';

/** One process's events from [contender, wait began, acquired, release began] holds. */
export function contentionEvents(
  holds: readonly (readonly [number, number, number, number])[],
  openWaits: readonly (readonly [number, number])[] = [],
): ContentionEvents {
  return {
    acquisitions: holds.flat(),
    openWaits: openWaits.flat(),
    failures: 0,
    stragglers: 0,
  };
}
