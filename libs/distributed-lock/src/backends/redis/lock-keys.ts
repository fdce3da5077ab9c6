// A lock's bookkeeping keys sit beside it, in its Cluster slot (the braces in
// `key`): the fencing counter, the wait queue and the queue's pass-over record.

/** The fencing counter of the lock `key`. */
export const fenceKey = (key: string): string => `${key}:fence`;
/** The FIFO wait queue of the lock `key`. */
export const queueKey = (key: string): string => `${key}:queue`;
/** How often in a row the head of `key`'s queue was passed over. */
export const bypassKey = (key: string): string => `${key}:bypass`;

/**
 * Identifies one waiting acquisition: a multi-key acquisition uses one token
 * for all its keys, so a hand-off is matched by key and token.
 */
export function handoffId(key: string, token: string): string {
  return `${token}|${key}`;
}
