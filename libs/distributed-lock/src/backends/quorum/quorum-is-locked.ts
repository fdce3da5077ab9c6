import { LockBackendError } from '../../errors/lock-errors.js';
import { askEveryNode, describeSilence, verdict } from './node-votes.js';
import type { HolderSessions } from './quorum-sessions.js';
import type { HolderReply, QuorumScripts } from './quorum-scripts.js';

/** What {@link isLockedOnMajority} needs of the backend. */
export interface LockedNodes {
  readonly scripts: readonly QuorumScripts[];
  readonly quorum: number;
  readonly nodeTimeoutMs: number;
  readonly sessions: HolderSessions;
}

/** The key is here, and its holder's session alive here or bound to none. */
function heldHere([holder, gone]: HolderReply): boolean {
  return holder !== undefined && gone === 0;
}

/**
 * Whether `key` is held on a majority of the nodes: a node holds it when the
 * key is there and its holder is bound to no session or to one not gone on a
 * majority (see quorum-sessions.ts). A holder whose session some node saw
 * gone is looked up on every node, only when the answer depends on it.
 *
 * @throws LockBackendError (as a rejection) when too few nodes answered to tell
 */
export async function isLockedOnMajority(
  nodes: LockedNodes,
  key: string,
): Promise<boolean> {
  const { scripts, quorum, nodeTimeoutMs, sessions } = nodes;
  const count = scripts.length;
  const round = await askEveryNode(
    count,
    (node) => scripts[node].holder(key),
    nodeTimeoutMs,
    (replies) => {
      const held = replies.filter((r) => heldHere(r.value)).length;
      const free = replies.filter((r) => r.value[0] === undefined).length;
      return held >= quorum || free > count - quorum;
    },
  );
  const lapsed = new Set<string>();
  if (round.replies.filter((r) => heldHere(r.value)).length < quorum) {
    const suspects = new Set(
      round.replies.flatMap(({ value: [holder, gone] }) =>
        holder !== undefined && gone === 1 ? [holder] : [],
      ),
    );
    await Promise.all(
      [...suspects].map(async (token) => {
        if ((await sessions.holderLapsed(token)).lapsed) lapsed.add(token);
      }),
    );
  }
  const held = round.replies.filter(
    ({ value: [holder] }) => holder !== undefined && !lapsed.has(holder),
  ).length;
  const outcome = verdict(held, round.replies.length - held, count, quorum);
  if (outcome === 'unknown')
    throw new LockBackendError(
      describeSilence(
        'isLocked',
        round.replies.length,
        count,
        quorum,
        round.firstError,
      ),
    );
  return outcome === 'yes';
}
