import { createHash } from 'node:crypto';

/** Hex characters of a buyer tag. */
export const BUYER_TAG_LENGTH = 8;

/**
 * What the public feed shows instead of a buyer's id: the first
 * {@link BUYER_TAG_LENGTH} hex characters of a SHA-256 of it. The same buyer
 * gets the same tag on every instance, so repeat buyers stand out; the id
 * itself never leaves the server. (A guessable id can still be confirmed by
 * hashing a guess: the tag hides ids from onlookers, it is not a secret.)
 */
export function buyerTag(userId: string): string {
  return createHash('sha256')
    .update(`flash-sale buyer ${userId}`)
    .digest('hex')
    .slice(0, BUYER_TAG_LENGTH);
}
