import type { SessionStore } from '../backends/lock-backend.js';
import { LockBackendError } from '../errors/lock-errors.js';
import {
  clockDriftMs,
  leaseDeadline,
  monotonicNow,
} from '../lease/lease-clock.js';
import { newSessionId } from './session-token.js';

/** A hold bound to the session: told, before anyone else can take it, that the session lapsed. */
export interface SessionBound {
  sessionLapsed(): void;
}

/**
 * This process's session with one lock store: a record with a short TTL that
 * the process renews every third of it, to which every hold without an
 * explicit lease is bound. One command per renewal, however many locks are
 * held. When the process dies, is frozen or is cut off, its record lapses
 * and every lock bound to it is free for the next waiter.
 *
 * **The holder is told first.** A renewal sets the record's TTL no earlier
 * than it was sent, so the record exists until at least the send time of the
 * last confirmed renewal plus the TTL, on the store's clock. The session's
 * local deadline is that moment on this process's monotonic clock, less the
 * drift allowance. At the deadline, or at the first look after it (a paused
 * process's timers fire late; `liveId` checks the clock itself), every bound
 * hold is marked lost, before any other process can have been granted it.
 * Then the record is ended, in case it was only slow renewals, so that the
 * locks go at once; later holds open a new session.
 */
export class ProcessSession {
  /** The open session, confirmed by the store; undefined while none is. */
  private id?: string;
  /** Until when (monotonic ms) the record surely exists. */
  private deadline = 0;
  private opening?: Promise<string>;
  private renewTimer?: NodeJS.Timeout;
  private deadlineTimer?: NodeJS.Timeout;
  private readonly bound = new Set<SessionBound>();
  private closed = false;
  private lastLapseAt?: number;
  private readonly stopWatching: () => void;

  /**
   * @param onLapse called after the holds of a lapsed session were told
   *   (for logging).
   */
  constructor(
    private readonly store: SessionStore,
    readonly ttlMs: number,
    private readonly onLapse: (id: string, holds: number) => void = () =>
      undefined,
  ) {
    // A store that restarted empty or failed over may have lost the record:
    // renewing at once finds out now, not a third of the TTL later.
    const stopReconnects =
      store.onReconnect?.(() => {
        if (this.id !== undefined && !this.closed) this.scheduleRenewal(0);
      }) ?? (() => undefined);
    const stopDisconnects =
      store.onDisconnect?.(() => this.lapse()) ?? (() => undefined);
    this.stopWatching = () => {
      stopReconnects();
      stopDisconnects();
    };
  }

  /** The lease a session hold's key carries in the store. */
  get holdLeaseMs(): number {
    return this.store.holdLeaseMs;
  }

  /** The id of the session, if one is open and its deadline has not passed. */
  get liveId(): string | undefined {
    if (this.id !== undefined && monotonicNow() >= this.deadline) this.lapse();
    return this.id;
  }

  /** Until when (monotonic ms) the live session surely lasts; 0 when none is live. */
  get liveUntil(): number {
    return this.liveId === undefined ? 0 : this.deadline;
  }

  /** When (monotonic ms) a session last lapsed; undefined while none has. */
  get lapsedAt(): number | undefined {
    return this.lastLapseAt;
  }

  /** How many holds are bound to the session. */
  get size(): number {
    return this.bound.size;
  }

  /** Resolves the live session's id, opening a session when none is live. */
  ready(): Promise<string> {
    const id = this.liveId;
    if (id !== undefined) return Promise.resolve(id);
    if (this.closed) return Promise.reject(closedError());
    this.opening ??= this.open().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  /**
   * Binds `hold` to session `id`. False, binding nothing, when `id` is not
   * the live session (it lapsed while the hold was being granted).
   */
  bind(hold: SessionBound, id: string): boolean {
    if (this.liveId !== id) return false;
    this.bound.add(hold);
    return true;
  }

  unbind(hold: SessionBound): void {
    this.bound.delete(hold);
  }

  /**
   * Stops renewing. With `end`, also ends the session in the store, so that
   * every lock still bound to it is free at once (the caller stops the holds
   * first). Without, the session lapses by itself within its TTL, and the
   * holds still bound to it are told at its deadline, as ever: a handler may
   * still run under them. Idempotent.
   */
  async close(end: boolean): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopWatching();
    clearTimeout(this.renewTimer);
    this.renewTimer = undefined;
    if (!end) return;
    const id = this.id;
    this.stopTimers();
    this.id = undefined;
    this.bound.clear();
    if (id !== undefined) await this.store.end(id).catch(() => undefined);
  }

  private async open(): Promise<string> {
    const id = newSessionId();
    const sentAt = monotonicNow();
    await this.store.open(id, this.ttlMs);
    const deadline = leaseDeadline(sentAt, this.ttlMs);
    if (this.closed || deadline <= monotonicNow()) {
      // Closed meanwhile, or confirmed so late that it may have lapsed already.
      void this.store.end(id).catch(() => undefined);
      throw this.closed
        ? closedError()
        : new LockBackendError('The lock session was confirmed too late');
    }
    this.id = id;
    this.deadline = deadline;
    this.armDeadline();
    this.scheduleNextRenewal();
    return id;
  }

  private scheduleRenewal(delayMs: number): void {
    clearTimeout(this.renewTimer);
    if (this.closed) return;
    this.renewTimer = setTimeout(() => void this.renew(), Math.max(1, delayMs));
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    const id = this.liveId;
    if (id === undefined || this.closed) return;
    const sentAt = monotonicNow();
    let alive: boolean;
    try {
      alive = await this.store.renew(id, this.ttlMs);
    } catch {
      // The store is away: try again while the deadline allows.
      if (this.liveId === id)
        this.scheduleRenewal(
          Math.max(50, (this.deadline - monotonicNow()) / 3),
        );
      return;
    }
    // Lapsed (and told) while the answer was on its way: it stays lapsed.
    if (this.liveId !== id) return;
    if (!alive) {
      this.lapse();
      return;
    }
    this.deadline = Math.max(
      this.deadline,
      sentAt + this.ttlMs - clockDriftMs(this.ttlMs),
    );
    this.armDeadline();
    this.scheduleNextRenewal();
  }

  /**
   * Every third of the TTL; sooner when answers are slow and a third would
   * leave less than the time to the deadline's half: a renewal sent that
   * late may not be answered before the deadline, though Redis would have
   * kept the session.
   */
  private scheduleNextRenewal(): void {
    const left = this.deadline - monotonicNow();
    this.scheduleRenewal(Math.min(this.ttlMs / 3, left / 2));
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    // Set for the current deadline (a renewal re-arms it): lapse when it
    // fires, even a hair early by the monotonic clock, as timers may.
    this.deadlineTimer = setTimeout(
      () => this.lapse(),
      Math.max(0, this.deadline - monotonicNow()),
    );
    this.deadlineTimer.unref();
  }

  private lapse(): void {
    const id = this.id;
    if (id === undefined) return;
    this.id = undefined;
    this.lastLapseAt = monotonicNow();
    this.stopTimers();
    const holds = [...this.bound];
    this.bound.clear();
    for (const hold of holds) hold.sessionLapsed();
    this.onLapse(id, holds.length);
    // Every hold was told. The record may still be there (renewals were only
    // slow): ending it frees the locks now rather than when it runs out.
    void this.store.end(id).catch(() => undefined);
  }

  private stopTimers(): void {
    clearTimeout(this.renewTimer);
    clearTimeout(this.deadlineTimer);
    this.renewTimer = undefined;
    this.deadlineTimer = undefined;
  }
}

function closedError(): LockBackendError {
  return new LockBackendError('The lock service is closed');
}
