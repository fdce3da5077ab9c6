import { LockBackendError } from '../../errors/lock-errors.js';
import { monotonicNow } from '../../lease/lease-clock.js';
import { sessionOf } from '../../session/session-token.js';
import type { SessionStore } from '../lock-backend.js';
import { startCountdown, stopCountdown, type Countdown } from './countdown.js';

/** A day: a session-bound lock is freed by its session long before. */
const HOLD_LEASE_MS = 24 * 60 * 60 * 1000;

interface SessionRecord {
  /** When the session lapses, on the monotonic clock. */
  expiresAt: number;
  /** Fires at the expiry the record had when it was armed; renewals only move `expiresAt`. */
  timer?: Countdown;
}

/**
 * The process sessions of a `MemoryLockBackend`, and which keys are held
 * under each: one record per session, timed on the monotonic clock. A record
 * is renewed only while it is live and, once lapsed or ended, is gone for
 * good: `onGone` is then told, once, the keys held under it, which the
 * backend frees and hands on.
 *
 * A session counts as gone from its expiry on, whether or not its timer has
 * fired yet ({@link isLive} reads the clock).
 */
export class MemorySessions implements SessionStore {
  /** {@inheritDoc SessionStore.holdLeaseMs} */
  readonly holdLeaseMs = HOLD_LEASE_MS;
  private readonly records = new Map<string, SessionRecord>();
  /** Keys held under tokens bound to each session, by session id. */
  private readonly heldKeys = new Map<string, Set<string>>();

  /**
   * @param assertOpen throws `LockBackendError` once the backend is closed.
   * @param onGone called once for each session that lapsed or was ended,
   *   with the keys still held under it.
   */
  constructor(
    private readonly assertOpen: () => void,
    private readonly onGone: (keys: readonly string[]) => void,
  ) {}

  /** Creates session `id` for `ttlMs`. Rejects when `id` is live already. */
  async open(id: string, ttlMs: number): Promise<void> {
    this.assertOpen();
    assertTtl(ttlMs);
    if (this.isLive(id)) {
      throw new LockBackendError(`Lock session ${id} is open already`);
    }
    // A record that lapsed but whose timer has not fired yet: its keys are
    // freed before the id means anything again.
    this.drop(id);
    const record: SessionRecord = { expiresAt: monotonicNow() + ttlMs };
    this.records.set(id, record);
    this.arm(id, record);
  }

  /** Sets the remaining time of live session `id` to `ttlMs`; false when it is gone. */
  async renew(id: string, ttlMs: number): Promise<boolean> {
    this.assertOpen();
    assertTtl(ttlMs);
    const record = this.records.get(id);
    if (record === undefined || !this.isLive(id)) {
      this.drop(id);
      return false;
    }
    record.expiresAt = monotonicNow() + ttlMs;
    return true;
  }

  /** Ends session `id` at once; nothing happens when it is gone already. */
  async end(id: string): Promise<void> {
    this.assertOpen();
    this.drop(id);
  }

  /** Whether session `id` exists and has not reached its expiry. */
  isLive(id: string): boolean {
    const record = this.records.get(id);
    return record !== undefined && monotonicNow() < record.expiresAt;
  }

  /** Whether holder token `owner` is bound to no session, or to a live one. */
  isHolderLive(owner: string): boolean {
    const id = sessionOf(owner);
    return id === undefined || this.isLive(id);
  }

  /** Milliseconds until the session of `owner` lapses: Infinity when it has none, 0 when it is gone. */
  holderRemainingMs(owner: string): number {
    const id = sessionOf(owner);
    if (id === undefined) return Infinity;
    const record = this.records.get(id);
    return record === undefined
      ? 0
      : Math.max(0, record.expiresAt - monotonicNow());
  }

  /** Notes that `owner` holds `key` (nothing to note for an owner bound to no session). */
  bind(key: string, owner: string): void {
    const id = sessionOf(owner);
    if (id === undefined) return;
    const keys = this.heldKeys.get(id) ?? new Set<string>();
    keys.add(key);
    this.heldKeys.set(id, keys);
  }

  /** Notes that `owner` no longer holds `key`. */
  unbind(key: string, owner: string): void {
    const id = sessionOf(owner);
    if (id === undefined) return;
    const keys = this.heldKeys.get(id);
    keys?.delete(key);
    if (keys?.size === 0) this.heldKeys.delete(id);
  }

  /** Forgets every session and stops every timer, telling no one. */
  close(): void {
    for (const record of this.records.values()) stopCountdown(record.timer);
    this.records.clear();
    this.heldKeys.clear();
  }

  /** Fires at the record's expiry; one renewed meanwhile waits again for the rest. */
  private arm(id: string, record: SessionRecord): void {
    const delay = Math.max(1, Math.ceil(record.expiresAt - monotonicNow()));
    record.timer = startCountdown(delay, () => {
      record.timer = undefined;
      if (this.records.get(id) !== record) return;
      if (this.isLive(id)) this.arm(id, record);
      else this.drop(id);
    });
  }

  private drop(id: string): void {
    const record = this.records.get(id);
    if (record === undefined) return;
    stopCountdown(record.timer);
    this.records.delete(id);
    this.onGone([...(this.heldKeys.get(id) ?? [])]);
  }
}

function assertTtl(ttlMs: number): void {
  if (!(ttlMs > 0 && Number.isFinite(ttlMs))) {
    throw new RangeError(
      `A session TTL must be a positive number of ms, got ${ttlMs}`,
    );
  }
}
