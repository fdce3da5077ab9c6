/**
 * Where C's longest waits come from: WINDOWS (default 20) 2 s windows of
 * C's shape per contender, the contenders in turn, each process recording
 * its event loop's longest delay and its GC pauses over the window. Prints
 * every window's longest wait with its split (others' holds, the lock free
 * between holders and the longest such gap) beside the worst event-loop
 * delay and GC pause of any of the window's processes and their count of
 * full (major) collections, the CPU its processes used per acquisition,
 * and how busy the whole machine was (and how much the hypervisor took:
 * steal), then per contender
 * the median and the longest wait, and how many of the windows whose
 * longest wait exceeded 1.5x the median had a process stalled for at least
 * the wait's longest gap (a stalled process, not a slow hand-off).
 *
 *   PROCESSES=1 HOLD_MS=1 node --import @swc-node/register/esm-register bench/probes/tail-windows.ts raw-fifo ours-service
 *
 * PROCESSES (default 1) worker processes with 16 / PROCESSES loops each;
 * HOLD_MS (default 0). Redis at REDIS_URL (default
 * redis://127.0.0.1:6379); keys `probe:tail:*`.
 */
import { median } from '../stats.js';
import { cWindowsInTurn, type ProbeWindowFigures } from './windows.js';

const seen = new Map<string, ProbeWindowFigures[]>();

const fixed = (ms: number) => ms.toFixed(1).padStart(6);
const percent = (share: number) => `${Math.round(share * 100)}%`;

function describe(id: string, n: number, window: ProbeWindowFigures): string {
  const parts = window.longestWaitParts;
  const loop = Math.max(0, ...window.stalls.map((s) => s.loopDelayMaxMs));
  const gc = Math.max(0, ...window.stalls.map((s) => s.gcLongestMs));
  const majors = window.stalls.reduce((sum, s) => sum + s.majorGcs, 0);
  const cpuUs =
    (window.stalls.reduce((sum, s) => sum + s.cpuMs, 0) * 1000) /
    Math.max(1, window.acquisitions);
  const machine = window.stalls[0]?.machine;
  return (
    `${id.padEnd(16)} #${String(n).padStart(2)} ${Math.round(window.acquisitionsPerSec).toString().padStart(6)}/s ` +
    `longest wait ${fixed(window.longestWaitMs)} ms` +
    (parts
      ? ` (held ${fixed(parts.heldMs)}, free ${fixed(parts.freeMs)}, longest gap ${fixed(parts.longestFreeMs)})`
      : '') +
    ` | loop delay max ${fixed(loop)} ms, longest GC ${fixed(gc)} ms, ${majors} major` +
    ` | ${Math.round(cpuUs)} µs CPU/acq` +
    (machine
      ? `, machine ${percent(machine.busy)} busy, ${percent(machine.steal)} steal`
      : '') +
    '\n'
  );
}

const ids = await cWindowsInTurn(
  'tail-windows.ts',
  { defaultProcesses: 1, keyPrefix: 'probe:tail:' },
  (id, n, window) => {
    if (!seen.has(id)) seen.set(id, []);
    seen.get(id)!.push(window);
    process.stdout.write(describe(id, n, window));
  },
);
for (const id of ids) {
  const all = seen.get(id) ?? [];
  const waits = all.map((w) => w.longestWaitMs);
  const typical = median(waits);
  const long = all.filter((w) => w.longestWaitMs > 1.5 * typical);
  const stalled = long.filter((w) =>
    w.stalls.some(
      (s) => s.loopDelayMaxMs >= (w.longestWaitParts?.longestFreeMs ?? 0),
    ),
  );
  process.stdout.write(
    `${id}: longest wait median ${typical.toFixed(1)} ms, worst ${Math.max(...waits).toFixed(1)} ms; ` +
      `${long.length} window(s) above 1.5x the median, ${stalled.length} of them with a process stalled as long as the wait's longest gap\n`,
  );
}
