/**
 * Hash slots as Redis Cluster computes them, for tests that need a key on a
 * given slot or node.
 */

/** How many hash slots a Redis Cluster has. */
export const SLOTS = 16_384;

/**
 * The hash slot of a key as Redis Cluster computes it: CRC16 (XMODEM) of the
 * hash tag (the text between the first `{` and the next `}`, if not empty),
 * else of the whole key, modulo 16384.
 */
export function keySlot(key: string | Buffer): number {
  const bytes = typeof key === 'string' ? Buffer.from(key) : key;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % SLOTS;
  }
  return crc16(bytes) % SLOTS;
}

/**
 * A hash tag (without braces) whose keys land in `slot`: `lock:{${tag}}`
 * hashes to `slot`. The same slot always gives the same tag.
 */
export function hashTagForSlot(slot: number): string {
  checkSlot(slot);
  let tag = tagsBySlot.get(slot);
  for (let i = 0; tag === undefined; i++) {
    if (crc16(Buffer.from(`s${i}`)) % SLOTS === slot) tag = `s${i}`;
  }
  tagsBySlot.set(slot, tag);
  return tag;
}

const tagsBySlot = new Map<number, string>();

/** @throws RangeError unless `slot` is an integer in 0-16383. */
export function checkSlot(slot: number): void {
  if (!Number.isInteger(slot) || slot < 0 || slot >= SLOTS) {
    throw new RangeError(`slot must be an integer in 0-16383, got ${slot}`);
  }
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}
