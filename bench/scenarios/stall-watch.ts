import {
  constants,
  monitorEventLoopDelay,
  PerformanceObserver,
  type PerformanceEntry,
} from 'node:perf_hooks';

/** What held up one process during a window. */
export interface Stalls {
  /** The event loop's longest delay (a 2 ms timer's lateness), ms. */
  readonly loopDelayMaxMs: number;
  /** Garbage collection pauses in all, and the longest, ms. */
  readonly gcMs: number;
  readonly gcLongestMs: number;
  /** Full (mark-sweep-compact) collections, which pause longest. */
  readonly majorGcs: number;
}

/**
 * Starts watching this process's event loop and GC pauses; the returned
 * function stops and answers what it saw. For probes only: its timer and
 * observer cost the process a little, so the benchmark's windows never
 * watch.
 */
export function watchStalls(): () => Stalls {
  const delay = monitorEventLoopDelay({ resolution: 2 });
  let gcMs = 0;
  let gcLongestMs = 0;
  let majorGcs = 0;
  const count = (entries: readonly PerformanceEntry[]): void => {
    for (const entry of entries) {
      // Node 20 puts the collection's kind in `detail`; its types do not say so.
      const { detail } = entry as { detail?: { kind?: number } };
      if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorGcs += 1;
      gcMs += entry.duration;
      gcLongestMs = Math.max(gcLongestMs, entry.duration);
    }
  };
  const observer = new PerformanceObserver((list) => count(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  delay.enable();
  return () => {
    delay.disable();
    // Entries are delivered in batches: those of the last moments are
    // still buffered.
    count(observer.takeRecords());
    observer.disconnect();
    return { loopDelayMaxMs: delay.max / 1e6, gcMs, gcLongestMs, majorGcs };
  };
}
