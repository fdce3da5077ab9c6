import type { TimedMemory } from '../timed-memory.js';
import type { AcquireReply, QuorumScripts } from './quorum-scripts.js';

/** After finding a key busy, its rounds and releases send the full scripts for this long. */
export const contendedMemoryMs = 1000;

const granted: AcquireReply = [1];
const notAsked: AcquireReply = [0];

/**
 * One node's vote in a round for a key not found busy lately:
 * acquire-free.lua, and acquire.lua only where that declines, so a node
 * answers as if acquire.lua alone had been sent. Declined after the round
 * was decided (`decided()`), the node is not asked again: the outcome
 * stands, and the round's later commands on that connection (a blind give-
 * back) must not be overtaken by a grant sent after them.
 */
export function voteIfFree(
  script: QuorumScripts,
  key: string,
  token: string,
  leaseMs: number,
  decided: () => boolean,
  full: () => Promise<AcquireReply>,
): Promise<AcquireReply> {
  return script
    .acquireFree(key, token, leaseMs)
    .then((taken) => (taken === 1 ? granted : decided() ? notAsked : full()));
}

/**
 * Releases `key` on one node where the backend has not found it busy
 * lately: release-unqueued.lua, and release.lua where that finds someone
 * waiting (it frees the lock and wakes them), so a node answers as if
 * release.lua alone had been sent. A node that had waiters marks the key
 * busy.
 */
export function releaseUnlessQueued(
  script: QuorumScripts,
  key: string,
  token: string,
  graceMs: number,
  contended: TimedMemory,
  track: (work: Promise<unknown>) => void,
): Promise<number> {
  return script.releaseUnqueued(key, token).then((released) => {
    if (released !== -1) return released;
    contended.remember(key);
    const full = script.release(key, token, graceMs);
    // Sent after the majority may have answered: close() waits for it.
    track(full);
    return full;
  });
}
