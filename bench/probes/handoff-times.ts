/**
 * Where the time of a hand-off between processes goes, for this library's
 * contenders: WINDOWS (default 20) 2 s windows of C's shape, each process
 * recording the wake-ups it read (bench/scenarios/handoff-watch.ts) and its
 * stalls. Each hand-off through Redis is split into
 *
 *   release -> grant: the releasing loop's release began, until Redis ran
 *     the release script that handed the lock on (the woken holder's fencing
 *     token is that moment on Redis's clock);
 *   grant -> read: until the woken process read its wake-up;
 *   read -> acquired: until the woken loop went on as the holder.
 *
 * Prints each part's median, 99th percentile and longest, then the longest
 * hand-offs with their parts and the longest event-loop delay of the
 * releasing and the woken process in that window. A slow wake-up shows as a
 * long grant -> read while the woken process's loop was not held up as long.
 *
 *   PROCESSES=4 HOLD_MS=0 node --import @swc-node/register/esm-register bench/probes/handoff-times.ts ours-service
 *
 * PROCESSES (default 4) worker processes with 16 / PROCESSES loops each;
 * HOLD_MS (default 0). Redis at REDIS_URL (default
 * redis://127.0.0.1:6379); keys `probe:handoff:*`.
 */
import { summarize } from '../stats.js';
import { cWindowsInTurn, type ProbeWindowFigures } from './windows.js';

/** One hand-off through Redis, on the shared clock (ms). */
interface Handoff {
  readonly releasedAt: number;
  readonly grantedAt: number;
  readonly readAt: number;
  readonly acquiredAt: number;
  /** Longest event-loop delay of the releasing and of the woken process in the window, ms. */
  readonly releaserLoopMs: number;
  readonly wokenLoopMs: number;
}

/** The latest of the sorted `times` at or before `at`, by index; -1 if none. */
function lastAtOrBefore(times: readonly number[], at: number): number {
  let low = 0;
  let high = times.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (times[mid] <= at) low = mid + 1;
    else high = mid;
  }
  return low - 1;
}

/**
 * Pairs each wake-up with the acquisition it led to (the woken process's
 * first one after it) and the release that handed the lock on (the last one
 * of any process that began before the grant).
 */
function handoffsOf(window: ProbeWindowFigures): Handoff[] {
  const releases: { at: number; process: number }[] = [];
  window.parts.forEach((part, process) => {
    for (let i = 3; i < part.acquisitions.length; i += 4)
      releases.push({ at: part.acquisitions[i], process });
  });
  releases.sort((x, y) => x.at - y.at);
  const releaseTimes = releases.map((release) => release.at);
  const loopMs = window.stalls.map((stalls) => stalls.loopDelayMaxMs);
  const handoffs: Handoff[] = [];
  window.parts.forEach((part, process) => {
    const acquired: number[] = [];
    for (let i = 2; i < part.acquisitions.length; i += 4)
      acquired.push(part.acquisitions[i]);
    acquired.sort((x, y) => x - y);
    const wakes = part.wakes ?? [];
    for (let i = 0; i < wakes.length; i += 2) {
      const [grantedAt, readAt] = [wakes[i], wakes[i + 1]];
      const next = lastAtOrBefore(acquired, readAt) + 1;
      const release = releases[lastAtOrBefore(releaseTimes, grantedAt)];
      if (next >= acquired.length || release === undefined) continue;
      handoffs.push({
        releasedAt: release.at,
        grantedAt,
        readAt,
        acquiredAt: acquired[next],
        releaserLoopMs: loopMs[release.process] ?? 0,
        wokenLoopMs: loopMs[process] ?? 0,
      });
    }
  });
  return handoffs;
}

const ms = (value: number) => value.toFixed(2).padStart(7);
const spread = (values: number[]) => {
  const { p50, p99, max } = summarize(values);
  return `p50 ${ms(p50)}  p99 ${ms(p99)}  max ${ms(max)}`;
};

const seen = new Map<string, Handoff[]>();
const ids = await cWindowsInTurn(
  'handoff-times.ts',
  { defaultProcesses: 4, keyPrefix: 'probe:handoff:', watchHandoffs: true },
  (id, n, window) => {
    const handoffs = handoffsOf(window);
    if (!seen.has(id)) seen.set(id, []);
    seen.get(id)!.push(...handoffs);
    process.stdout.write(
      `${id} #${n}: ${window.acquisitions} acquisitions, ` +
        `${handoffs.length} hand-offs through Redis, longest wait ` +
        `${window.longestWaitMs.toFixed(1)} ms\n`,
    );
  },
);
for (const id of ids) {
  const handoffs = seen.get(id) ?? [];
  process.stdout.write(
    `\n${id}: ${handoffs.length} hand-offs through Redis (ms)\n` +
      `  release -> grant     ${spread(handoffs.map((h) => h.grantedAt - h.releasedAt))}\n` +
      `  grant -> read        ${spread(handoffs.map((h) => h.readAt - h.grantedAt))}\n` +
      `  read -> acquired     ${spread(handoffs.map((h) => h.acquiredAt - h.readAt))}\n` +
      `  release -> acquired  ${spread(handoffs.map((h) => h.acquiredAt - h.releasedAt))}\n` +
      `  longest:\n`,
  );
  const longest = handoffs
    .toSorted(
      (x, y) => y.acquiredAt - y.releasedAt - (x.acquiredAt - x.releasedAt),
    )
    .slice(0, 8);
  for (const h of longest)
    process.stdout.write(
      `    ${ms(h.acquiredAt - h.releasedAt)} = ${ms(h.grantedAt - h.releasedAt)} + ${ms(h.readAt - h.grantedAt)} + ${ms(h.acquiredAt - h.readAt)}` +
        `  | loop delay max: releaser ${ms(h.releaserLoopMs)}, woken ${ms(h.wokenLoopMs)}\n`,
    );
}
