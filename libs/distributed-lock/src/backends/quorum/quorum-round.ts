import { leaseDeadline, monotonicNow } from '../../lease/lease-clock.js';
import { askEveryNode, describeSilence, type NodeReply } from './node-votes.js';
import type { TimedMemory } from '../timed-memory.js';
import { voteIfFree } from './quorum-fast-paths.js';
import type { AcquireReply, QuorumScripts } from './quorum-scripts.js';
import type { HolderSessions } from './quorum-sessions.js';
import type { WakeChannels } from './quorum-waiting.js';
import type { RestartGuard } from './restart-guard.js';

/** What an acquisition needs of its backend. */
export interface AcquireContext {
  readonly scripts: readonly QuorumScripts[];
  readonly quorum: number;
  readonly nodeTimeoutMs: number;
  readonly retryDelayMs: number;
  readonly waiterGraceMs: number;
  readonly guard: RestartGuard;
  readonly channels: WakeChannels;
  readonly sessions: HolderSessions;
  /** Keys found busy lately: their rounds send acquire.lua at once. */
  readonly contended: TimedMemory;
  /** Counts work that outlives the call (giving votes back), for close(). */
  readonly track: (work: Promise<unknown>) => void;
}

/** The acquisition a round is sent for. */
export interface RoundRequest {
  readonly key: string;
  readonly token: string;
  readonly leaseMs: number;
  /** The waiter's place in the nodes' queues (ms on its clock). */
  readonly arrival: number;
  /** When the acquisition was called (monotonic ms): grants count from it. */
  readonly calledAt: number;
  /** The wait left now, in ms; 0 when not waiting (try once, do not queue). */
  readonly waitLeft: () => number;
  /** Holders whose session is gone on a majority: their lock is free. */
  readonly lapsedHolders: readonly string[];
}

/** A holder bound to a session, as a busy round saw it. */
export interface SessionHolder {
  readonly token: string;
  /** Some node said the holder's session is gone there. */
  readonly goneSomewhere: boolean;
}

/** The outcome of one round. */
export type Attempt =
  | { readonly kind: 'granted'; readonly leaseMs: number }
  | {
      readonly kind: 'busy';
      /** When to try again if no wake-up comes first: the earliest hint of any node. */
      readonly wakeInMs?: number;
      /** The holder's remaining lease, as the nodes reported it. */
      readonly retryAfterMs?: number;
      /** A majority granted, too late for a valid lease: try again soon. */
      readonly lapsed: boolean;
      /** The holders bound to a session that the nodes named. */
      readonly sessionHolders?: readonly SessionHolder[];
    }
  | { readonly kind: 'unreachable'; readonly message: string };

export interface Round {
  readonly attempt: Attempt;
  /**
   * For a lost round: settles once every vote it won was given back, or
   * sent back blindly to a node that never answered. The next round of the
   * same token must wait for it (see {@link runRound}).
   */
  readonly stragglers?: Promise<void>;
}

/**
 * One Redlock round: acquire.lua on every node at once, each call bounded by
 * the node timeout. It wins with a majority of grants from nodes that count
 * (see RestartGuard) while the lease is still valid: its deadline counts
 * from when the round was sent, less the clock drift allowance
 * (`leaseDeadline`); the grant's `leaseMs` is the lease counted from the
 * round's send, measured from the call (the holder's deadline then takes
 * the same drift off: Redlock's validity). It is decided as soon as more answers cannot change that.
 *
 * A lost round gives back the grants it got, and those that arrive later, so
 * nobody is blocked by a minority; the waiter keeps its place in the queues
 * (release.lua puts it back). The token is the same in every round of an
 * acquisition, so a vote given back for a lost round must reach each node
 * before the next round does, or it would delete that round's grant there
 * after it was counted: late votes are given back as they arrive, the next
 * round waits for {@link Round.stragglers}, and a node that never answered
 * is given back blindly (on its connection, after the round's command). A
 * node whose connection is down is skipped: its vote would not count (see
 * RestartGuard) and waiting for it would only slow every round. Each node
 * first frees the lock of a holder the request names as lapsed (its session
 * gone on a majority, see quorum-sessions.ts).
 *
 * A key not found busy lately, with no lapsed holder to free, is asked with
 * acquire-free.lua first (see voteIfFree): most rounds find the lock free,
 * and that script's four arguments cost both sides less on every node than
 * acquire.lua's ten. A round that does not win marks the key busy.
 */
export async function runRound(
  context: AcquireContext,
  request: RoundRequest,
): Promise<Round> {
  const { scripts, quorum, guard } = context;
  const { key, token, leaseMs } = request;
  const count = scripts.length;
  const graceMs = Math.ceil(context.waiterGraceMs);
  const giveBack = (node: number): void =>
    context.track(
      scripts[node].release(key, token, graceMs, {
        arrival: request.arrival,
        waitMs: request.waitLeft(),
      }),
    );
  const counted = (r: NodeReply<AcquireReply>): boolean =>
    r.value[0] === 1 && guard.counts(r.node);
  const sentAt = monotonicNow();
  const waitLeft = request.waitLeft();
  const sent = new Set<number>();
  const freeCheck =
    request.lapsedHolders.length === 0 && !context.contended.has(key);
  const lease = Math.ceil(leaseMs);
  const askFull = (node: number) =>
    scripts[node].acquire(
      key,
      token,
      lease,
      request.arrival,
      waitLeft,
      graceMs,
      request.lapsedHolders,
    );
  let decided = false;
  const isDecided = () => decided;
  let won = false;
  let closed = false;
  const round = await askEveryNode(
    count,
    (node) => {
      if (!guard.reachable(node))
        return Promise.reject(new Error('connection down'));
      sent.add(node);
      if (!freeCheck) return askFull(node);
      return voteIfFree(scripts[node], key, token, lease, isDecided, () =>
        askFull(node),
      );
    },
    context.nodeTimeoutMs,
    (replies, pending) => {
      const grants = replies.filter(counted).length;
      decided =
        grants >= quorum ||
        (grants + pending < quorum && replies.length >= quorum);
      return decided;
    },
    // A won lock keeps a late grant (extend and release go to every node).
    (late) => {
      if (!won && !closed && late.value[0] === 1) giveBack(late.node);
    },
  );
  decided = true;
  const grants = round.replies.filter(counted).length;
  const validUntil = leaseDeadline(sentAt, leaseMs);
  if (grants >= quorum && validUntil > monotonicNow()) {
    won = true;
    return {
      // The lease every granting node set began after the send: counted from
      // the call, as LockGrant.leaseMs is; the holder takes the drift off.
      attempt: {
        kind: 'granted',
        leaseMs: sentAt + leaseMs - request.calledAt,
      },
    };
  }
  context.contended.remember(key);
  for (const { node, value } of round.replies) {
    if (value[0] === 1) giveBack(node);
  }
  const stragglers = round.rest().then((silent) => {
    closed = true;
    for (const node of silent) if (sent.has(node)) giveBack(node);
  });
  if (round.replies.length < quorum) {
    const message = describeSilence(
      'acquire',
      round.replies.length,
      count,
      quorum,
      round.firstError,
    );
    return { attempt: { kind: 'unreachable', message }, stragglers };
  }
  let wakeInMs: number | undefined;
  let retryAfterMs: number | undefined;
  const holders = new Map<string, boolean>();
  for (const { value } of round.replies) {
    const [state, hint, holder, gone] = value;
    if (state === 0 && holder !== undefined)
      holders.set(holder, holders.get(holder) === true || gone === 1);
    if (hint === undefined || hint < 0) continue;
    if (state === 0) retryAfterMs = Math.min(retryAfterMs ?? hint, hint);
    wakeInMs = Math.min(wakeInMs ?? hint, hint);
  }
  return {
    attempt: {
      kind: 'busy',
      wakeInMs,
      retryAfterMs,
      lapsed: grants >= quorum,
      sessionHolders: [...holders].map(([holder, goneSomewhere]) => ({
        token: holder,
        goneSomewhere,
      })),
    },
    stragglers,
  };
}
