import type { LockBusy } from '../lock-backend.js';

/** What acquire.lua answered: taken with a fencing token, or busy (queued with an entry, or not). */
export type AcquireReply = [1, number] | [0, number, string?];

/** acquire.lua answers a bare fencing token when taken, an array otherwise. */
export function parseAcquireReply(raw: unknown): AcquireReply {
  return Array.isArray(raw) ? (raw as [0, number, string?]) : [1, Number(raw)];
}

/** A busy answer, with the holder's remaining lease when Redis told it. */
export function busy(pttl: number): LockBusy {
  const remaining = Number(pttl);
  return remaining > 0
    ? { acquired: false, retryAfterMs: remaining }
    : { acquired: false };
}
