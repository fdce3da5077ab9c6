import type { LockBusy } from '../lock-backend.js';

/**
 * What acquire.lua answered: taken with a fencing token, or busy: the
 * holder's remaining lease, the queue entry (undefined when not queued) and
 * the holder's token.
 */
export type AcquireReply = [1, number] | [0, number, string?, string?];

/** acquire.lua answers a bare fencing token when taken, an array otherwise. */
export function parseAcquireReply(raw: unknown): AcquireReply {
  if (!Array.isArray(raw)) return [1, Number(raw)];
  const [, pttl, entry, holder] = raw as [0, number, string, string?];
  return [0, pttl, entry === '' ? undefined : entry, holder || undefined];
}

/** A busy answer, with the holder's remaining lease when Redis told it. */
export function busy(pttl: number): LockBusy {
  const remaining = Number(pttl);
  return remaining > 0
    ? { acquired: false, retryAfterMs: remaining }
    : { acquired: false };
}
