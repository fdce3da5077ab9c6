/** Why a held lock stopped being ours before it was released. */
export type LockLostReason =
  /** A renewal or the release found another owner's token, or no key at all. */
  | 'taken-over'
  /** An explicit `leaseTime` ran out while the holder still held the lock. */
  | 'lease-expired'
  /** Renewals failed (Redis unreachable) until the lease ran out. */
  | 'renewal-failed'
  /**
   * The process's lock session lapsed (renewals failed, or the process was
   * paused) while the lock was held: every lock bound to it is lost.
   */
  | 'session-expired';

/** Payload of the `lost` event of {@link LockService.events}. */
export interface LockLostEvent {
  /** The key, without prefix. */
  readonly key: string;
  /** The owner token of the lost hold. */
  readonly token: string;
  /** The hold's fencing token, if one had been issued. */
  readonly fencingToken?: number;
  readonly reason: LockLostReason;
}

/** Events of {@link LockService.events}. */
export interface LockEventMap {
  lost: [LockLostEvent];
}
