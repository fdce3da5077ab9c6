import { readFileSync } from 'node:fs';

/**
 * Stopping and continuing other processes (SIGSTOP/SIGCONT) for fault tests,
 * made synchronous: `kill(2)` only queues the signal, so these helpers also
 * wait until `/proc/<pid>/stat` shows the new state. Where there is no `/proc`
 * (not Linux) they just send the signal.
 */

const STATE_TIMEOUT_MS = 1_000;
const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/**
 * Whether `pid` is stopped by a signal (state `T`/`t` in `/proc/<pid>/stat`).
 * `undefined` when that cannot be told: no `/proc`, or no such process.
 */
export function isProcessStopped(pid: number): boolean | undefined {
  const state = processState(pid);
  return state === undefined ? undefined : state === 'T' || state === 't';
}

/**
 * Whether `pid` has exited: no such process, or a zombie (`Z`), which has
 * exited but not been reaped yet, e.g. an orphan waiting for a slow init.
 */
export function isProcessGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  return processState(pid) === 'Z';
}

/**
 * Sends SIGSTOP (`stopped` true) or SIGCONT (`stopped` false) to `pid` and
 * blocks, briefly, until the process is in that state, so whatever the caller
 * does next happens to a frozen (or running) process.
 *
 * @throws Error when the signal cannot be sent (no such process), or the state
 *   did not change within a second.
 */
export function setProcessStopped(pid: number, stopped: boolean): void {
  process.kill(pid, stopped ? 'SIGSTOP' : 'SIGCONT');
  const deadline = Date.now() + STATE_TIMEOUT_MS;
  for (;;) {
    const state = isProcessStopped(pid);
    if (state === undefined || state === stopped) return;
    if (Date.now() > deadline) {
      throw new Error(
        `Process ${pid} did not ${stopped ? 'stop' : 'continue'} within ${STATE_TIMEOUT_MS} ms`,
      );
    }
    Atomics.wait(sleepCell, 0, 0, 1);
  }
}

/** The one-letter state of `pid` from `/proc/<pid>/stat`, if it can be read. */
function processState(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // "<pid> (<comm>) <state> ...": comm may hold spaces and parentheses.
  const end = stat.lastIndexOf(')');
  return end === -1 ? undefined : stat.charAt(end + 2);
}
