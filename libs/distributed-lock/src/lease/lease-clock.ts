/**
 * Lease arithmetic on the local monotonic clock.
 *
 * A lease is set by Redis at some moment the client cannot see: after the
 * command that set it was sent, and before its answer came back. So the client
 * counts the lease from the send time, which errs early, never late. Like
 * Redlock, it also takes off an allowance for the two clocks (Redis's expiry
 * timer and this process's) running at slightly different rates. The wall
 * clock is never used: a step of the system time must not make a lapsed lease
 * look alive.
 */

/** Milliseconds on a clock that never jumps (not the time of day). */
export function monotonicNow(): number {
  return performance.now();
}

/** Allowance for clock rate differences over a lease: 1% of it plus 2 ms. */
export function clockDriftMs(leaseMs: number): number {
  return Math.ceil(leaseMs * 0.01) + 2;
}

/**
 * The last moment (monotonic) at which a lease of `leaseMs`, set by a command
 * sent at `sentAt` (monotonic) or later, is surely still in force.
 */
export function leaseDeadline(sentAt: number, leaseMs: number): number {
  return sentAt + leaseMs - clockDriftMs(leaseMs);
}

/**
 * Whether a grant whose lease is surely in force until `deadline` may be
 * handed to its caller as it is. With less than a third of `leaseMs` left the
 * caller would have to renew at once, and a grant that may have lapsed must
 * never reach it: such a grant is confirmed with Redis first.
 */
export function isFresh(deadline: number, leaseMs: number): boolean {
  return deadline - monotonicNow() >= leaseMs / 3;
}
