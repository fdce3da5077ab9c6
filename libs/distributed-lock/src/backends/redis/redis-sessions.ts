import { LockBackendError } from '../../errors/lock-errors.js';
import { sessionKey } from '../../session/session-token.js';
import type { SessionStore } from '../lock-backend.js';
import type { LockContext } from './lock-context.js';

/** A session hold's key lives a day, renewed every 8 h: one command per lock per 8 h. */
const holdLeaseMs = 24 * 60 * 60 * 1000;

/**
 * Process sessions on Redis: one key per session, `<prefix>session:{<id>}`,
 * with the session's TTL. Opened with `SET NX`, renewed with `PEXPIRE`,
 * which cannot bring back a key that expired: a lapsed session stays lapsed.
 * On Redis Cluster the session key sits in a slot of its own, apart from the
 * locks bound to it; it is renewed with one command in the whole Cluster.
 * Waiters read it through `HolderSessions`.
 *
 * With `freeOnDisconnect`, the key holds `client:<run id>:<id>`: the
 * server's `run_id` and the `CLIENT ID` of the connection that renews it
 * (otherwise it holds `session`), so that a waiter can see the connection gone as
 * soon as Redis does, and the session counts as lapsed here the moment that
 * connection closes.
 */
export class RedisSessions implements SessionStore {
  readonly holdLeaseMs = holdLeaseMs;
  /** Counts the connection's closes: a session opened across one is not trusted. */
  private closes = 0;
  private readonly countClose = (): void => {
    this.closes += 1;
  };

  constructor(
    private readonly c: LockContext,
    private readonly freeOnDisconnect: boolean,
  ) {
    if (freeOnDisconnect && c.client.isCluster)
      throw new RangeError(
        'freeOnDisconnect needs one Redis server (standalone or Sentinel), not a Cluster',
      );
    if (freeOnDisconnect) c.client.on('close', this.countClose);
  }

  async open(id: string, ttlMs: number): Promise<void> {
    const closes = this.closes;
    const value = this.freeOnDisconnect
      ? await this.connectionName()
      : 'session';
    // A re-sent SET finds the key its first run made: nil, which is fine too.
    await this.c.calls.call(
      this.c.client.set(this.key(id), value, 'PX', Math.ceil(ttlMs), 'NX'),
      'session open',
    );
    if (this.closes !== closes)
      throw new LockBackendError(
        'The connection to Redis dropped while the lock session was opened',
      );
  }

  /** `client:<run id>:<id>` of the connection this backend renews on. */
  private async connectionName(): Promise<string> {
    const [id, runId] = await Promise.all([
      this.c.calls.call(this.c.client.client('ID'), 'session open'),
      this.c.holderSessions.serverRunId(),
    ]);
    return `client:${runId}:${String(id)}`;
  }

  async renew(id: string, ttlMs: number): Promise<boolean> {
    const renewed = await this.c.calls.call(
      this.c.client.pexpire(this.key(id), Math.ceil(ttlMs)),
      'session renewal',
    );
    return Number(renewed) === 1;
  }

  async end(id: string): Promise<void> {
    this.c.holderSessions.forget(id);
    await this.c.calls.call(this.c.client.del(this.key(id)), 'session end');
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

  /** With `freeOnDisconnect`: the connection whose id the session records closed. */
  onDisconnect(listener: () => void): () => void {
    if (!this.freeOnDisconnect) return () => undefined;
    const { client } = this.c;
    client.on('close', listener);
    return () => client.off('close', listener);
  }

  close(): void {
    this.c.client.off('close', this.countClose);
  }

  private key(id: string): string {
    return sessionKey(this.c.settings.keyPrefix, id);
  }
}
