import { LockKeyError } from '../errors/lock-errors.js';
import { compileLockKeys, encodeKeyPart, validateLockKey } from './index.js';
import {
  keyErrorFrom,
  origin,
  randomGenerator,
  thrownBy,
} from './key-template.test-support.js';

describe('encodeKeyPart and key namespaces', () => {
  it.each([
    ['1:admin', '1%3Aadmin'],
    ['{a}', '%7Ba%7D'],
    ['100%', '100%25'],
    ['%3A', '%253A'],
    ['a b', 'a%20b'],
    ['a\nb\u0000', 'a%0Ab%00'],
    ['a/b?c#d&e=f', 'a%2Fb%3Fc%23d%26e%3Df'],
    ['é😀', '%C3%A9%F0%9F%98%80'],
    ["-_.!~*'()", "-_.!~*'()"],
  ])('encodes %j as %j', (value, encoded) => {
    expect(encodeKeyPart(value)).toBe(encoded);
  });

  it('encodes numbers and bigints through their decimal form', () => {
    expect(encodeKeyPart(42)).toBe('42');
    expect(encodeKeyPart(-0.5)).toBe('-0.5');
    expect(encodeKeyPart(10n)).toBe('10');
  });

  it('keeps a value from reaching into another template’s namespace', () => {
    const [forged] = compileLockKeys('coupon:<0>').resolve(['1:admin']);
    const [genuine] = compileLockKeys('coupon:<0>:admin').resolve([1]);

    expect(forged).toBe('coupon:1%3Aadmin');
    expect(genuine).toBe('coupon:1:admin');
    expect(forged).not.toBe(genuine);
  });

  it('keeps braces in values from forming a Redis Cluster hash tag', () => {
    const [key] = compileLockKeys('coupon:<0>').resolve(['{a}']);

    expect(key).toBe('coupon:%7Ba%7D');
    expect(key).not.toMatch(/[{}]/);
  });

  it('maps different values to different keys (random strings, decoded back)', () => {
    const random = randomGenerator(20_240_601);
    const alphabet = [...'ab:%{}  -_.~é😀\n\t/<>', '\u0000', '%3A', '%25'];
    const randomString = () =>
      Array.from(
        { length: 1 + Math.floor(random() * 8) },
        () => alphabet[Math.floor(random() * alphabet.length)],
      ).join('');
    const keys = compileLockKeys('pair:<0>:<1>');
    const keyOfPair = new Map<string, string>();

    for (let run = 0; run < 2_000; run++) {
      const pair = [randomString(), randomString()];
      const [key] = keys.resolve(pair);
      const [prefix, ...parts] = key.split(':');

      expect(prefix).toBe('pair');
      expect(parts.map(decodeURIComponent)).toEqual(pair);
      keyOfPair.set(JSON.stringify(pair), key);
    }
    expect(new Set(keyOfPair.values()).size).toBe(keyOfPair.size);
  });
});

describe('key length', () => {
  it('counts the bytes of a template key', () => {
    const keys = compileLockKeys('k:<0>', origin);

    expect(keys.resolve(['a'.repeat(510)])[0]).toHaveLength(512);
    expect(keyErrorFrom('k:<0>', ['a'.repeat(511)]).message).toBe(
      'Cannot build lock key from template "k:<0>" on CouponController.buy: the key is 513 bytes long in UTF-8; the maximum is 512',
    );
  });

  it('counts encoded multi-byte values and multi-byte literal text in UTF-8 bytes', () => {
    const keys = compileLockKeys('€:<0>', origin, { maxKeyLength: 11 });

    expect(keys.resolve(['é'])).toEqual(['€:%C3%A9']); // 3 + 1 + 6 bytes
    expect(() => keys.resolve(['éé'])).toThrow(LockKeyError);
  });

  it('applies a custom maximum to function results', () => {
    const keys = compileLockKeys(() => ['ok', '€€'], origin, {
      maxKeyLength: 5,
    });

    expect(() => keys.resolve([])).toThrow(
      'the key function returned an invalid key "€€": it is 6 bytes long in UTF-8; the maximum is 5',
    );
  });
});

describe('validateLockKey', () => {
  it.each(['coupon:1', 'user 1', 'ünïcödé:😀', '<0>', 'a'.repeat(512)])(
    'returns the valid key %j',
    (key) => {
      expect(validateLockKey(key)).toBe(key);
    },
  );

  it.each([
    ['', 'Invalid lock key "": it is empty'],
    [
      'coupon:{1}',
      'Invalid lock key "coupon:{1}": "{" at position 7 is reserved for Redis Cluster hash tags',
    ],
    [
      'coupon:1}',
      'Invalid lock key "coupon:1}": "}" at position 8 is reserved for Redis Cluster hash tags',
    ],
    [
      'a\nb',
      'Invalid lock key "a\\nb": control character U+000A at position 1',
    ],
    [
      'a\u009b',
      'Invalid lock key "a\u009b": control character U+009B at position 1',
    ],
    ['\ud83d', 'Invalid lock key "\\ud83d": unpaired surrogate at position 0'],
  ])('rejects %j', (key, message) => {
    const error = thrownBy(() => validateLockKey(key));

    expect(error).toBeInstanceOf(LockKeyError);
    expect((error as Error).message).toBe(message);
  });

  it('counts the length in UTF-8 bytes, not in UTF-16 code units', () => {
    const atLimit = `${'a'.repeat(509)}€`;
    const overLimit = `${'a'.repeat(510)}€`;

    expect(validateLockKey(atLimit)).toBe(atLimit);
    expect(overLimit).toHaveLength(511);
    expect(() => validateLockKey(overLimit)).toThrow(
      'it is 513 bytes long in UTF-8; the maximum is 512',
    );
    expect(() => validateLockKey('😀😀', 7)).toThrow('it is 8 bytes long');
  });

  it('cuts a long key short in the message', () => {
    const message = (
      thrownBy(() => validateLockKey('x'.repeat(2_000))) as Error
    ).message;

    expect(message.length).toBeLessThan(250);
  });

  it('rejects a key that is not a string and a bad maximum', () => {
    expect(() => validateLockKey(42 as never)).toThrow(
      'Invalid lock key: expected a string, got a number',
    );
    expect(() => validateLockKey('a', 0)).toThrow(LockKeyError);
  });
});
