import { monotonicNow } from '../lease/lease-clock.js';
import type { ProcessSession } from './process-session.js';

/**
 * - `off`: no sessions (`sessionTtl: false`, or a store without them);
 * - `none`: none opened yet, as no lock without a lease was taken;
 * - `open`: a session is live;
 * - `lapsed`: the last one lapsed; the next lock opens a new one.
 */
export type LockSessionState = 'off' | 'none' | 'open' | 'lapsed';

/** The process session as a health check reports it. */
export interface LockSessionHealth {
  readonly state: LockSessionState;
  /**
   * Open and renewed on time, or not needed: false only while an open
   * session has less than a third of its TTL left. Renewals come every
   * third of it, so at least one is overdue: the store does not confirm
   * them, and the locks bound to the session are about to be lost.
   *
   * A lapse that is over does not count: the next lock opens a new
   * session, which a readiness check that stayed down would never let
   * happen.
   */
  readonly alive: boolean;
  /** The live session's id (the prefix of its holders' tokens). */
  readonly id?: string;
  /** The session TTL, in ms. */
  readonly ttlMs?: number;
  /** How long the open session surely lasts without another renewal, in ms. */
  readonly expiresInMs?: number;
  /** How long ago the last session lapsed, in ms (state `lapsed`). */
  readonly lapsedMsAgo?: number;
}

/** The state of `session` (undefined when sessions are off). */
export function sessionHealthOf(
  session: ProcessSession | undefined,
): LockSessionHealth {
  if (!session) return { state: 'off', alive: true };
  const { ttlMs } = session;
  // Read first: it lapses a session whose deadline passed unnoticed.
  const id = session.liveId;
  const now = monotonicNow();
  if (id !== undefined) {
    const expiresInMs = Math.max(0, Math.round(session.liveUntil - now));
    return {
      state: 'open',
      alive: expiresInMs >= ttlMs / 3,
      id,
      ttlMs,
      expiresInMs,
    };
  }
  const { lapsedAt } = session;
  if (lapsedAt === undefined) return { state: 'none', alive: true, ttlMs };
  return {
    state: 'lapsed',
    alive: true,
    ttlMs,
    lapsedMsAgo: Math.round(now - lapsedAt),
  };
}
