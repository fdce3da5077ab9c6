/** keySlot and hashTagForSlot, without a cluster. */
import { hashTagForSlot, keySlot } from './redis-cluster-slots.js';

describe('keySlot', () => {
  it('hashes like Redis Cluster (reference values from the cluster spec)', () => {
    expect(keySlot('123456789')).toBe(0x31c3 % 16_384);
    expect(keySlot('foo')).toBe(12_182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('foo{bar}{zap}')).toBe(keySlot('bar'));
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
    expect(keySlot(Buffer.from([0xff, 0x00, 0x7b]))).toBeLessThan(16_384);
  });

  it('finds a hash tag for any slot', () => {
    for (const slot of [0, 1, 5460, 5461, 16_383]) {
      expect(keySlot(`lock:{${hashTagForSlot(slot)}}`)).toBe(slot);
    }
    expect(() => hashTagForSlot(16_384)).toThrow(RangeError);
  });
});
