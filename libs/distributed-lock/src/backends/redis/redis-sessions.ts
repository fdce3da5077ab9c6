import { clockDriftMs, monotonicNow } from '../../lease/lease-clock.js';
import { sessionKey, sessionOf } from '../../session/session-token.js';
import type { SessionStore } from '../lock-backend.js';
import type { LockContext } from './lock-context.js';

/** A session hold's key lives a day, renewed every 8 h: one command per lock per 8 h. */
const holdLeaseMs = 24 * 60 * 60 * 1000;

/** Forget what is known of other processes' sessions beyond this many. */
const knownSessionsSweepAt = 1024;

/**
 * Process sessions on Redis: one key per session, `<prefix>session:{<id>}`,
 * with the session's TTL. Opened with `SET NX`, renewed with `PEXPIRE`,
 * which cannot bring back a key that expired: a lapsed session stays lapsed.
 * On Redis Cluster the session key sits in a slot of its own, apart from the
 * locks bound to it; it is renewed with one command in the whole Cluster.
 *
 * The other side, for waiters: {@link holderSessionLeft} reads a holder's
 * session. A lock whose holder's session is gone is freed by kick.lua with a
 * compare-and-delete on that holder's token. Reading the session and
 * deleting the lock are two steps, on two slots in a Cluster, and need no
 * atomicity between them: the session, once seen gone, cannot come back, and
 * the delete only takes the token that was seen.
 */
export class RedisSessions implements SessionStore {
  readonly holdLeaseMs = holdLeaseMs;
  /** Other processes' sessions seen alive: until when (monotonic ms) they surely are. */
  private readonly aliveUntil = new Map<string, number>();

  constructor(private readonly c: LockContext) {}

  async open(id: string, ttlMs: number): Promise<void> {
    // A re-sent SET finds the key its first run made: nil, which is fine too.
    await this.c.calls.call(
      this.c.client.set(this.key(id), '1', 'PX', Math.ceil(ttlMs), 'NX'),
      'session open',
    );
  }

  async renew(id: string, ttlMs: number): Promise<boolean> {
    const renewed = await this.c.calls.call(
      this.c.client.pexpire(this.key(id), Math.ceil(ttlMs)),
      'session renewal',
    );
    return Number(renewed) === 1;
  }

  onReconnect(listener: () => void): () => void {
    const { client } = this.c;
    let lost = false;
    const onClose = (): void => {
      lost = true;
    };
    const onReady = (): void => {
      if (!lost) return;
      lost = false;
      listener();
    };
    client.on('close', onClose);
    client.on('ready', onReady);
    return () => {
      client.off('close', onClose);
      client.off('ready', onReady);
    };
  }

  async end(id: string): Promise<void> {
    this.aliveUntil.delete(id);
    await this.c.calls.call(this.c.client.del(this.key(id)), 'session end');
  }

  /**
   * How long the session of the holder `token` surely lasts, in ms: 0 when
   * it is gone, undefined when `token` is bound to no session. Asks Redis,
   * unless `cached` and the session was seen alive lately.
   */
  async holderSessionLeft(
    token: string,
    cached = false,
  ): Promise<number | undefined> {
    const id = sessionOf(token);
    if (id === undefined) return undefined;
    const now = monotonicNow();
    const known = this.aliveUntil.get(id);
    if (cached && known !== undefined && known > now) return known - now;
    const pttl = Number(
      await this.c.calls.call(
        this.c.client.pttl(this.key(id)),
        'session check',
      ),
    );
    if (pttl === -2) {
      this.aliveUntil.delete(id);
      return 0;
    }
    // A key read with pttl p lasts until at least p after the read was sent.
    const left = pttl < 0 ? this.c.settings.handoffLeaseMs : pttl;
    this.remember(id, now + left - clockDriftMs(left));
    return left;
  }

  /**
   * When a waiter for a lock held by `holder`, with `pttl` of its lease
   * left, should first check on it: when the lease ends, or when the
   * holder's session may end as far as this process knows, or at once when
   * it knows nothing of that session.
   */
  firstCheckIn(holder: string | undefined, pttl: number): number {
    const id = holder === undefined ? undefined : sessionOf(holder);
    if (id === undefined) return pttl;
    const left = (this.aliveUntil.get(id) ?? 0) - monotonicNow();
    return left > 0 ? Math.min(pttl, left) : 0;
  }

  private remember(id: string, until: number): void {
    this.aliveUntil.set(id, until);
    if (this.aliveUntil.size < knownSessionsSweepAt) return;
    const now = monotonicNow();
    for (const [known, end] of this.aliveUntil)
      if (end <= now) this.aliveUntil.delete(known);
  }

  /** How many other processes' sessions are remembered (for leak checks). */
  get size(): number {
    return this.aliveUntil.size;
  }

  private key(id: string): string {
    return sessionKey(this.c.settings.keyPrefix, id);
  }
}
