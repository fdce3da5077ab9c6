import { LockBackendError } from '../../errors/lock-errors.js';
import { askEveryNode, describeSilence, verdict } from './node-votes.js';
import type { QuorumScripts } from './quorum-scripts.js';
import type { RestartGuard } from './restart-guard.js';

/** What {@link issueQuorumFence} needs of the backend. */
export interface FenceNodes {
  readonly scripts: readonly QuorumScripts[];
  readonly quorum: number;
  readonly nodeTimeoutMs: number;
  readonly guard: RestartGuard;
}

/*
 * Fencing tokens over a majority of independent nodes
 * ====================================================
 *
 * A token is issued in two rounds:
 *
 * 1. Read. fence.lua runs on every node: where `token` holds the lock it
 *    stores and returns the candidate max(counter + 1, server time in µs).
 *    The round goes on only when a majority R of nodes that count (see
 *    RestartGuard) answered with a candidate; M is the largest candidate
 *    received.
 * 2. Write back. raise-fence.lua sets counter = max(counter, M) on every
 *    node; M is handed out only once a majority W acknowledged it.
 *
 * Claim: a fence() that resolves M' began after another fence() of the same
 * key resolved M (any holder, any process) has M' > M.
 *
 * Proof. Any two majorities of the N nodes intersect: |W| + |R'| > N. Let x
 * be a node in W (of the first call) and in R' (of the second).
 *  - If x kept its data, its counter was >= M before the first call resolved,
 *    so before the second began, and counters never go down (raise-fence
 *    only raises, fence.lua only adds). x's candidate in the second call is
 *    then >= M + 1, and M' is the largest candidate, so M' > M.
 *  - If x lost the counter between the calls (restarted without persistence,
 *    or the counter expired after a day without use), it re-seeds from its
 *    clock in µs. A counter only ever holds a clock reading, a value one
 *    above another counter's, or a token copied back, so every token is at
 *    most the highest node clock so far plus the few tokens issued since:
 *    the new candidate exceeds M as long as node clocks agree to within the
 *    time between the two calls. A restart this process saw mutes x for the
 *    longest lease after it was seen (RestartGuard), so x is part of R' only
 *    if the calls are at least that far apart (30 s by default), or a day
 *    for an expired counter: far above the skew of NTP-synchronised clocks.
 *    A restart nobody here saw rests on the clock argument alone.
 * Two such calls therefore never issue the same token either, and a holder
 * gets a token only while a majority still sees its token as the holder's:
 * once the lock is someone else's on a majority, fence() resolves
 * undefined.
 *
 * Calls that overlap in time are not ordered by this argument. Those of two
 * holders do not overlap while both are within their validity: a read needs
 * a majority holding the caller's token, and Redlock's validity rule keeps
 * two holders' majorities apart in time. A holder that asks after its
 * validity ended, while the nodes have not expired its lock yet, may get a
 * token concurrently with its successor, in either order: the resource still
 * takes writes in token order only, but may refuse the successor until it
 * asks again. (LockService's holds stop asking at their local deadline.)
 * A holder whose process session lapsed is such a holder too: its successor
 * frees its lock (quorum-sessions.ts) without touching the counters, so a
 * takeover is ordered like any other change of holder.
 */

/**
 * Issues the next fencing token of `key` for `token` (see the proof above).
 * Resolves undefined when a majority no longer holds the lock for `token`.
 *
 * @throws LockBackendError (as a rejection) when too few nodes answered to
 *   tell, or the write-back did not reach a majority
 */
export async function issueQuorumFence(
  nodes: FenceNodes,
  key: string,
  token: string,
): Promise<number | undefined> {
  const { scripts, quorum, nodeTimeoutMs, guard } = nodes;
  const count = scripts.length;
  const counted = (node: number, value: number | null): boolean =>
    value !== null && guard.counts(node);
  const read = await askEveryNode(
    count,
    (node) => scripts[node].fence(key, token),
    nodeTimeoutMs,
    (replies) => {
      const holding = replies.filter((r) => counted(r.node, r.value)).length;
      return holding >= quorum || replies.length - holding > count - quorum;
    },
  );
  const holding = read.replies.filter((r) => counted(r.node, r.value));
  const outcome = verdict(
    holding.length,
    read.replies.length - holding.length,
    count,
    quorum,
  );
  if (outcome === 'no') return undefined;
  if (outcome === 'unknown') {
    throw new LockBackendError(
      describeSilence(
        'fence',
        read.replies.length,
        count,
        quorum,
        read.firstError,
      ),
    );
  }
  // Candidates of nodes that do not count only raise M, which is harmless.
  let fence = 0;
  for (const { value } of read.replies) {
    if (value !== null && Number(value) > fence) fence = Number(value);
  }

  const written = await askEveryNode(
    count,
    (node) => scripts[node].raiseFence(key, fence),
    nodeTimeoutMs,
    (replies) => replies.length >= quorum,
  );
  if (written.replies.length < quorum) {
    throw new LockBackendError(
      describeSilence(
        'fence write-back',
        written.replies.length,
        count,
        quorum,
        written.firstError,
      ),
    );
  }
  return fence;
}
