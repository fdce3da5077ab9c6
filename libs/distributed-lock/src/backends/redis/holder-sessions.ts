import { clockDriftMs, monotonicNow } from '../../lease/lease-clock.js';
import { sessionKey, sessionOf } from '../../session/session-token.js';
import type { LockContext } from './lock-context.js';

/** Forget what is known of other processes' sessions beyond this many. */
const knownSessionsSweepAt = 1024;

/**
 * While a holder's session records its connection (`freeOnDisconnect`), its
 * waiters look at that connection this often.
 */
export const disconnectCheckMs = 200;

/** What is known of one holder's session. */
interface KnownSession {
  /** Until when (monotonic ms) the session surely lasts. */
  readonly aliveUntil: number;
  /** It records its connection: waiters check on it every `disconnectCheckMs`. */
  readonly watchesConnection: boolean;
}

/**
 * The waiters' side of process sessions (see `RedisSessions`): reads the
 * session of a lock's holder. A lock whose holder's session is gone is freed
 * by kick.lua with a compare-and-delete on that holder's token. Reading the
 * session and deleting the lock are two steps, on two slots in a Cluster,
 * and need no atomicity between them: the session, once seen gone, cannot
 * come back, and the delete only takes the token that was seen.
 *
 * A session that records its connection's id counts as gone as soon as
 * Redis no longer lists that connection (`CLIENT LIST ID`): a killed
 * process's connection closes at once, while its key would live on for the
 * TTL. The holder treats its session as lapsed the moment its own side of
 * the connection closes.
 */
export class HolderSessions {
  private readonly known = new Map<string, KnownSession>();
  /** Reads under way, by session id. */
  private readonly reading = new Map<string, Promise<number>>();

  /** The server's `run_id`, read once per connection (a failover changes it). */
  private runId?: Promise<string>;
  private readonly forgetServer = (): void => {
    this.runId = undefined;
  };

  constructor(private readonly c: LockContext) {
    c.client.on('close', this.forgetServer);
  }

  /** How many other processes' sessions are remembered. */
  get size(): number {
    return this.known.size;
  }

  /**
   * How long the session of the holder `token` surely lasts, in ms: 0 when
   * it is gone, undefined when `token` is bound to no session. Asks Redis,
   * unless `cached` and the session was seen alive lately.
   */
  async left(token: string, cached = false): Promise<number | undefined> {
    const id = sessionOf(token);
    if (id === undefined) return undefined;
    const now = monotonicNow();
    const seen = this.known.get(id);
    if (
      cached &&
      seen !== undefined &&
      !seen.watchesConnection &&
      seen.aliveUntil > now
    )
      return seen.aliveUntil - now;
    // Checks of many keys held by one process share one read of its session.
    let reading = this.reading.get(id);
    if (reading === undefined) {
      reading = this.read(id).finally(() => this.reading.delete(id));
      this.reading.set(id, reading);
    }
    return reading;
  }

  /** Reads session `id`: how long it surely lasts (at most until its connection's next look), 0 when gone. */
  private async read(id: string): Promise<number> {
    const sentAt = monotonicNow();
    const key = sessionKey(this.c.settings.keyPrefix, id);
    const [[, pttl], [, connection]] = (await this.c.calls.call(
      this.c.client.pipeline().pttl(key).get(key).exec(),
      'session check',
    )) as [[unknown, number], [unknown, string | null]];
    if (Number(pttl) === -2 || connection === null) {
      this.known.delete(id);
      return 0;
    }
    const [, runId, client] = /^client:([^:]+):(\d+)$/.exec(connection) ?? [];
    // Connection ids count per server: one recorded on another server (the
    // master before a failover) says nothing here, and the TTL decides.
    const watchesConnection =
      client !== undefined && runId === (await this.serverRunId());
    if (watchesConnection && !(await this.isConnected(client))) {
      this.known.delete(id);
      return 0;
    }
    // A key read with pttl p lasts until at least p after the read was sent.
    const left =
      Number(pttl) < 0 ? this.c.settings.handoffLeaseMs : Number(pttl);
    this.remember(id, {
      aliveUntil: sentAt + left - clockDriftMs(left),
      watchesConnection,
    });
    return watchesConnection ? Math.min(left, disconnectCheckMs) : left;
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
    const seen = this.known.get(id);
    if (seen === undefined) return 0;
    const left = seen.aliveUntil - monotonicNow();
    if (left <= 0) return 0;
    return Math.min(
      pttl,
      left,
      seen.watchesConnection ? disconnectCheckMs : left,
    );
  }

  forget(id: string): void {
    this.known.delete(id);
  }

  /** Forgets everything (the backend is closing). */
  clear(): void {
    this.known.clear();
    this.c.client.off('close', this.forgetServer);
  }

  /** The `run_id` of the server this backend's connection is on now. */
  serverRunId(): Promise<string> {
    this.runId ??= this.c.calls
      .call(this.c.client.info('server'), 'session check')
      .then((info) => /^run_id:(\w+)/m.exec(String(info))?.[1] ?? '')
      .catch((error: unknown) => {
        this.runId = undefined;
        throw error;
      });
    return this.runId;
  }

  /** Whether Redis still lists connection `id`; true when it cannot tell (no permission). */
  private async isConnected(id: string): Promise<boolean> {
    try {
      const listed = await this.c.calls.call(
        this.c.client.client('LIST', 'ID', id),
        'session check',
      );
      return String(listed).trim() !== '';
    } catch {
      return true;
    }
  }

  private remember(id: string, session: KnownSession): void {
    this.known.set(id, session);
    if (this.known.size < knownSessionsSweepAt) return;
    const now = monotonicNow();
    for (const [knownId, { aliveUntil }] of this.known)
      if (aliveUntil <= now) this.known.delete(knownId);
  }
}
