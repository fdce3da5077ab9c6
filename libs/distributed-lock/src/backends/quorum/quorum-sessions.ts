import type { Redis } from 'ioredis';
import { LockBackendError } from '../../errors/lock-errors.js';
import { sessionKey, sessionOf } from '../../session/session-token.js';
import type { SessionStore } from '../lock-backend.js';
import {
  askEveryNode,
  askForMajority,
  describeSilence,
  type Majority,
  type NodeReply,
} from './node-votes.js';
import type { RestartGuard } from './restart-guard.js';

/** Sessions known to be gone on a majority are remembered up to this many. */
const rememberedLapses = 1024;

/** What {@link QuorumSessions} needs of its backend. */
export interface SessionNodes {
  readonly clients: readonly Redis[];
  readonly quorum: number;
  readonly nodeTimeoutMs: number;
  /** The backend's key prefix: session keys are `<prefix>session:{<id>}`. */
  readonly keyPrefix: string;
  /** The lease a session hold's lock carries: the backend's `maxLeaseMs`. */
  readonly holdLeaseMs: number;
  readonly guard: RestartGuard;
  /** Counts work that outlives the call, for close(). */
  readonly track: (work: Promise<unknown>) => void;
}

/** What a look at a lock holder's session on every node found. */
export interface HolderSessionCheck {
  /** Gone on a majority of the nodes: every lock bound to it is free. */
  readonly lapsed: boolean;
  /** Not lapsed: in how many ms a majority may have lapsed, at the earliest, when known. */
  readonly lapsesInMs?: number;
}

/** How acquisitions and isLocked look at a holder's session. */
export interface HolderSessions {
  holderLapsed(token: string): Promise<HolderSessionCheck>;
}

/*
 * When a holder's session counts as lapsed
 * ========================================
 *
 * The session is one key per node, `<prefix>session:{<id>}`, created with
 * SET NX PX on every node and renewed with PEXPIRE, which cannot bring a key
 * back: on each node, once gone it stays gone. The holder's ProcessSession
 * counts a renewal only when a majority renewed it, and its deadline is that
 * renewal's send time plus the TTL, less the drift allowance.
 *
 * A lock bound to the session is freed only once the session is seen gone on
 * a majority G. The last renewal the holder counted reached a majority M;
 * G and M share a node, where the session was renewed at or after that send
 * time and has lapsed since, so the holder's deadline is past. A renewal
 * counted later would need a node of G to renew a key it no longer has.
 * Being gone on a majority therefore stays true, and the holder's deadline
 * is past: the lock is free on every node, deleted by a compare-and-delete on
 * the holder's token (acquire.lua), and the node's queue decides who gets it.
 *
 * Gone on one node is not enough: the lock may sit on a majority that
 * differs from the session's. With A, B, C, a lock held on A and C and a
 * session renewed on A and B, C may lose the session while the holder's
 * renewals still succeed; freeing the lock on C would let a waiter take B
 * and C while its holder is still told it holds it.
 *
 * Only the nodes that confirmed the open within its round take part in the
 * session's renewals (those this backend opened): an open's SET NX that
 * reaches a node later could create the session there after a waiter saw it
 * gone, and a renewal counting that node would break the argument above.
 * Every node that confirmed it in time has it from before its answer on, so
 * there "gone" stays gone.
 *
 * A node seen to restart lost its sessions too: it is muted by the
 * RestartGuard for the longest lease or session TTL in use, so its "gone"
 * counts only once every session renewal it had taken would have lapsed.
 */

/**
 * Process sessions on the quorum's nodes: opened, renewed and ended on every
 * node at once, one command per node each, and checked by waiters (see the
 * comment above).
 */
export class QuorumSessions implements SessionStore, HolderSessions {
  readonly holdLeaseMs: number;
  private readonly majority: Majority;
  /** Ids of sessions seen gone on a majority, oldest first. */
  private readonly lapsed = new Set<string>();
  /** Of each session opened here and not ended, the nodes that confirmed its open in time. */
  private readonly renewedOn = new Map<string, ReadonlySet<number>>();

  constructor(private readonly nodes: SessionNodes) {
    this.holdLeaseMs = nodes.holdLeaseMs;
    this.majority = {
      count: nodes.clients.length,
      quorum: nodes.quorum,
      timeoutMs: nodes.nodeTimeoutMs,
    };
  }

  /**
   * Creates the session on every node, waiting for each up to the node
   * timeout; resolves when a majority that counts created it.
   */
  async open(id: string, ttlMs: number): Promise<void> {
    assertTtl(ttlMs);
    this.nodes.guard.noteLease(ttlMs);
    const key = this.key(id);
    const { count, quorum, timeoutMs } = this.majority;
    const round = await askEveryNode(
      count,
      (node) =>
        this.whenReachable(node, (client) =>
          client.set(key, '1', 'PX', Math.ceil(ttlMs), 'NX'),
        ),
      timeoutMs,
    );
    const created = round.replies.filter((r) => r.value === 'OK');
    const yes = created.filter((r) => this.nodes.guard.counts(r.node)).length;
    if (yes >= quorum) {
      const nodes = new Set(created.map((r) => r.node));
      this.renewedOn.set(id, nodes);
      return;
    }
    // The id is never used: the nodes that made it let it go now.
    this.nodes.track(this.end(id));
    throw new LockBackendError(
      round.replies.length < quorum
        ? describeSilence(
            'session open',
            round.replies.length,
            count,
            quorum,
            round.firstError,
          )
        : `Redlock session open: ${yes} of ${count} Redis nodes created it (restarted nodes do not count yet), a majority is ${quorum}`,
    );
  }

  /**
   * PEXPIRE on every node that confirmed the open in time: true when a
   * majority that counts still had it, false when a majority cannot have
   * had it; rejects when too few answered to tell.
   */
  async renew(id: string, ttlMs: number): Promise<boolean> {
    assertTtl(ttlMs);
    this.nodes.guard.noteLease(ttlMs);
    const key = this.key(id);
    // A session another instance opened: every node takes part.
    const takesPart = this.renewedOn.get(id);
    return askForMajority(
      'session renewal',
      this.majority,
      (node) =>
        takesPart && !takesPart.has(node)
          ? Promise.resolve(0)
          : this.whenReachable(node, (client) =>
              client.pexpire(key, Math.ceil(ttlMs)),
            ),
      (r) => r.value === 1 && this.nodes.guard.counts(r.node),
    );
  }

  /** DEL on every node, best effort: where it fails the session lapses with its TTL. */
  async end(id: string): Promise<void> {
    this.renewedOn.delete(id);
    const key = this.key(id);
    await askEveryNode(
      this.majority.count,
      (node) => this.whenReachable(node, (client) => client.del(key)),
      this.majority.timeoutMs,
    );
  }

  /**
   * Whether the session of the holder `token` is gone on a majority of the
   * nodes (remembered once seen: it stays gone). Never for a token bound to
   * no session. Nodes that do not answer, or do not count, do not say gone.
   */
  async holderLapsed(token: string): Promise<HolderSessionCheck> {
    const id = sessionOf(token);
    if (id === undefined) return { lapsed: false };
    if (this.lapsed.has(id)) return { lapsed: true };
    const key = this.key(id);
    const { count, quorum, timeoutMs } = this.majority;
    const gone = (r: NodeReply<number>): boolean =>
      r.value === -2 && this.nodes.guard.counts(r.node);
    const round = await askEveryNode(
      count,
      (node) => this.whenReachable(node, (client) => client.pttl(key)),
      timeoutMs,
      (replies) => replies.filter(gone).length >= quorum,
    );
    const goneOn = round.replies.filter(gone).length;
    if (goneOn >= quorum) {
      this.remember(id);
      return { lapsed: true };
    }
    // A majority is gone once enough of the nodes that still have it lapse.
    const left = round.replies
      .flatMap((r) => (r.value >= 0 ? [r.value] : []))
      .toSorted((a, b) => a - b);
    return { lapsed: false, lapsesInMs: left[quorum - goneOn - 1] };
  }

  private remember(id: string): void {
    this.lapsed.add(id);
    if (this.lapsed.size > rememberedLapses)
      this.lapsed.delete(this.lapsed.values().next().value as string);
  }

  /**
   * Skips a node whose connection is down: its answer would not count (see
   * RestartGuard), and a SET NX queued for it could create the session there
   * long after it lapsed everywhere else.
   */
  private whenReachable<T>(
    node: number,
    send: (client: Redis) => Promise<T>,
  ): Promise<T> {
    if (!this.nodes.guard.reachable(node))
      return Promise.reject(new Error('connection down'));
    return send(this.nodes.clients[node]);
  }

  private key(id: string): string {
    return sessionKey(this.nodes.keyPrefix, id);
  }
}

function assertTtl(ttlMs: number): void {
  if (!(ttlMs > 0 && Number.isFinite(ttlMs)))
    throw new RangeError(
      `A session TTL must be a positive number of ms, got ${ttlMs}`,
    );
}
