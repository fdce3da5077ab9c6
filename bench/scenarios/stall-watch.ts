import { readFileSync } from 'node:fs';
import {
  constants,
  monitorEventLoopDelay,
  PerformanceObserver,
  type PerformanceEntry,
} from 'node:perf_hooks';

/** What held up one process during a window, and the CPU it used. */
export interface Stalls {
  /** The event loop's longest delay (a 2 ms timer's lateness), ms. */
  readonly loopDelayMaxMs: number;
  /** Garbage collection pauses in all, and the longest, ms. */
  readonly gcMs: number;
  readonly gcLongestMs: number;
  /** Full (mark-sweep-compact) collections, which pause longest. */
  readonly majorGcs: number;
  /** CPU time (user + system) the process used, ms. */
  readonly cpuMs: number;
  /**
   * The whole machine over the window (Linux `/proc/stat`; absent
   * elsewhere): the share of all CPUs' time spent busy, and the share the
   * hypervisor gave to other guests (steal), from 0 to 1.
   */
  readonly machine?: { readonly busy: number; readonly steal: number };
}

/** `/proc/stat`'s all-CPU counters (in clock ticks), or undefined off Linux. */
function machineTicks(): number[] | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    return line.trim().split(/\s+/).slice(1).map(Number);
  } catch {
    return undefined;
  }
}

function machineShares(
  before: number[] | undefined,
): Stalls['machine'] | undefined {
  const after = machineTicks();
  if (!before || !after) return undefined;
  // user nice system idle iowait irq softirq steal (guest time is in user)
  const d = after.slice(0, 8).map((ticks, i) => ticks - before[i]!);
  const all = d.reduce((sum, ticks) => sum + ticks, 0);
  if (all <= 0) return undefined;
  const busy = [0, 1, 2, 5, 6].reduce((sum, i) => sum + d[i]!, 0);
  return { busy: busy / all, steal: d[7]! / all };
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
  const cpuAtStart = process.cpuUsage();
  const ticksAtStart = machineTicks();
  return () => {
    const cpu = process.cpuUsage(cpuAtStart);
    const machine = machineShares(ticksAtStart);
    delay.disable();
    // Entries are delivered in batches: those of the last moments are
    // still buffered.
    count(observer.takeRecords());
    observer.disconnect();
    return {
      loopDelayMaxMs: delay.max / 1e6,
      gcMs,
      gcLongestMs,
      majorGcs,
      cpuMs: (cpu.user + cpu.system) / 1000,
      ...(machine ? { machine } : {}),
    };
  };
}
