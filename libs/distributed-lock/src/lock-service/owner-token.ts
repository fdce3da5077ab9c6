import { randomBytes } from 'node:crypto';

/**
 * A random 128-bit owner token. Drawing 16 bytes from the CSPRNG per call
 * costs more than the rest of an acquisition's Node work, so tokens are cut
 * from a 4 KiB block of random bytes refilled when used up.
 */
let tokenBytes = randomBytes(4096);
let tokenOffset = 0;
export function newOwnerToken(): string {
  if (tokenOffset + 16 > tokenBytes.length) {
    tokenBytes = randomBytes(4096);
    tokenOffset = 0;
  }
  const token = tokenBytes.toString('base64url', tokenOffset, tokenOffset + 16);
  tokenOffset += 16;
  return token;
}
