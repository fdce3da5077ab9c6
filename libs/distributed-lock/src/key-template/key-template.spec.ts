import { LockKeyError, LockTemplateError } from '../errors/lock-errors.js';
import {
  compileLockKeys,
  DEFAULT_MAX_KEY_LENGTH,
  encodeKeyPart,
  validateLockKey,
  type LockKeySource,
} from './index.js';

const origin = { className: 'CouponController', methodName: 'buy' };

/** Runs `action`, which must throw, and returns what it threw. */
function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected the action to throw');
}

function keyErrorFrom(
  source: LockKeySource | readonly LockKeySource[],
  args: readonly unknown[],
): LockKeyError {
  const error = thrownBy(() => compileLockKeys(source, origin).resolve(args));
  expect(error).toBeInstanceOf(LockKeyError);
  return error as LockKeyError;
}

/** Small seeded generator, so a failing random case can be replayed. */
function randomGenerator(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function keyForOrder(orderId: string): string {
  return `order:${orderId}`;
}

/** What a placeholder accepts, restated independently of the implementation. */
function isUsableKeyValue(value: unknown): boolean {
  return (
    (typeof value === 'string' && value !== '') ||
    (typeof value === 'number' && Number.isFinite(value)) ||
    typeof value === 'bigint'
  );
}

describe('compileLockKeys: template syntax', () => {
  it('names the class, the method and the template in the message', () => {
    const error = thrownBy(() => compileLockKeys('coupon:<0', origin));

    expect(error).toBeInstanceOf(LockTemplateError);
    expect(error).toMatchObject({
      message:
        'Invalid lock key template "coupon:<0" on CouponController.buy: unclosed placeholder at position 7',
      code: 'LOCK_TEMPLATE_INVALID',
      template: 'coupon:<0',
      className: 'CouponController',
      methodName: 'buy',
    });
  });

  it.each([
    ['', 'the template is empty'],
    ['coupon:<0', 'unclosed placeholder at position 7'],
    ['coupon:<0:<1>', 'unclosed placeholder at position 7'],
    ['<', 'unclosed placeholder at position 0'],
    ['coupon:0>', 'stray ">" at position 8'],
    ['coupon:<0>>', 'stray ">" at position 10'],
    ['coupon:<>', 'empty placeholder at position 7'],
    [
      'coupon:<a>',
      'argument index "a" in <a> at position 7 is not a non-negative integer',
    ],
    [
      'coupon:<-1>',
      'argument index "-1" in <-1> at position 7 is not a non-negative integer',
    ],
    [
      'coupon:< 0>',
      'argument index " 0" in < 0> at position 7 is not a non-negative integer',
    ],
    [
      'coupon:<.a>',
      'argument index "" in <.a> at position 7 is not a non-negative integer',
    ],
    [
      'coupon:<99999999999999999999>',
      'argument index "99999999999999999999" in <99999999999999999999> at position 7 is not a non-negative integer',
    ],
    ['coupon:<0..a>', 'empty path segment in <0..a> at position 7'],
    ['coupon:<0.>', 'empty path segment in <0.> at position 7'],
    ['coupon:<0.a-b>', 'invalid path segment "a-b" in <0.a-b> at position 7'],
    ['coupon:<0.1a>', 'invalid path segment "1a" in <0.1a> at position 7'],
    [
      'coupon:<0.a[0]>',
      'invalid path segment "a[0]" in <0.a[0]> at position 7',
    ],
    [
      '{coupon}:<0>',
      '"{" at position 0 is reserved for Redis Cluster hash tags',
    ],
    [
      'coupon:<0>}',
      '"}" at position 10 is reserved for Redis Cluster hash tags',
    ],
    [
      'coupon:<{0}>',
      '"{" at position 8 is reserved for Redis Cluster hash tags',
    ],
    ['coupon:\n<0>', 'control character U+000A at position 7'],
    ['coupon:<0>\t', 'control character U+0009 at position 10'],
    ['\u0000coupon', 'control character U+0000 at position 0'],
    ['coupon\u007f', 'control character U+007F at position 6'],
    ['coupon\u0085', 'control character U+0085 at position 6'],
    ['coupon\ud800:<0>', 'unpaired surrogate at position 6'],
  ])('rejects %j: %s', (template, problem) => {
    const error = thrownBy(() => compileLockKeys(template, origin));

    expect(error).toBeInstanceOf(LockTemplateError);
    expect((error as LockTemplateError).message).toBe(
      `Invalid lock key template ${JSON.stringify(template)} on CouponController.buy: ${problem}`,
    );
    expect((error as LockTemplateError).template).toBe(template);
  });

  it('names the faulty template when several are given', () => {
    const error = thrownBy(() =>
      compileLockKeys(['user:<0>', 'coupon:<x>'], origin),
    );

    expect((error as LockTemplateError).template).toBe('coupon:<x>');
    expect((error as Error).message).toContain('"coupon:<x>"');
  });

  it('leaves out what it does not know of the origin', () => {
    expect(() => compileLockKeys('<')).toThrow(
      'Invalid lock key template "<": unclosed placeholder at position 0',
    );
    expect(() =>
      compileLockKeys('<', { className: 'CouponController' }),
    ).toThrow('Invalid lock key template "<" on CouponController: unclosed');
    expect(() => compileLockKeys('<', { methodName: 'buy' })).toThrow(
      'Invalid lock key template "<" on buy: unclosed',
    );
  });

  it('rejects an empty list of sources', () => {
    const error = thrownBy(() => compileLockKeys([], origin));

    expect(error).toBeInstanceOf(LockTemplateError);
    expect((error as Error).message).toBe(
      'Invalid lock key on CouponController.buy: no key template given',
    );
  });

  it.each([
    [42, 'a number'],
    [null, 'null'],
    [undefined, 'undefined'],
    [{}, 'an object'],
    [['coupon:<0>'], 'an array'],
    [Symbol('key'), 'a symbol'],
  ])('rejects a source that is %s', (source, description) => {
    const error = thrownBy(() =>
      compileLockKeys(['coupon:<0>', source as never], origin),
    );

    expect(error).toBeInstanceOf(LockTemplateError);
    expect((error as Error).message).toBe(
      `Invalid lock key on CouponController.buy: a key source must be a string or a function, got ${description}`,
    );
  });

  it('rejects a template whose literal text alone is too long', () => {
    expect(() =>
      compileLockKeys('a'.repeat(DEFAULT_MAX_KEY_LENGTH + 1), origin),
    ).toThrow(LockTemplateError);
    // 3 + 3 + 1 bytes of literal text, and at least one for the placeholder.
    expect(() =>
      compileLockKeys('€€:<0>', origin, { maxKeyLength: 8 }),
    ).not.toThrow();
    expect(() =>
      compileLockKeys('€€:<0>', origin, { maxKeyLength: 7 }),
    ).toThrow('its keys are at least 8 bytes long in UTF-8; the maximum is 7');
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
    'rejects maxKeyLength %s',
    (maxKeyLength) => {
      expect(() =>
        compileLockKeys('coupon:<0>', origin, { maxKeyLength }),
      ).toThrow(LockTemplateError);
    },
  );

  it.each([
    'global-lock',
    'coupon:<0>',
    'coupon:<10>',
    'order:<0.user_id>:<0.$meta.items.12.sku>',
    'with space and ünïcödé 😀:<0>',
    '<0>:<1>',
    "a'()*!~-_.:<0>",
  ])('accepts %j', (template) => {
    expect(() => compileLockKeys(template, origin)).not.toThrow();
  });
});

describe('compileLockKeys: description and highestArgumentIndex', () => {
  it('reports the highest argument index any template reads', () => {
    expect(compileLockKeys('coupon:<0>').highestArgumentIndex).toBe(0);
    expect(compileLockKeys(['a:<2.x>', 'b:<0>:<1>']).highestArgumentIndex).toBe(
      2,
    );
    expect(compileLockKeys('global').highestArgumentIndex).toBe(-1);
    expect(compileLockKeys(() => 'x').highestArgumentIndex).toBe(-1);
    expect(compileLockKeys([() => 'x', 'y:<3>']).highestArgumentIndex).toBe(3);
  });

  it('joins the templates and names functions', () => {
    expect(compileLockKeys('coupon:<0>').description).toBe('coupon:<0>');
    expect(
      compileLockKeys(['user:<0>', keyForOrder, (id: string) => id])
        .description,
    ).toBe('user:<0>, [function keyForOrder], [function anonymous]');
  });
});

describe('compileLockKeys: resolving templates', () => {
  it('substitutes the arguments the method receives', () => {
    const keys = compileLockKeys('transfer:<0>:<1>:<0>');

    expect(keys.resolve(['alice', 'bob'])).toEqual([
      'transfer:alice:bob:alice',
    ]);
    expect(keys.resolve(['carol', 7])).toEqual(['transfer:carol:7:carol']);
  });

  it('returns a template without placeholders as it is', () => {
    expect(compileLockKeys('global-lock').resolve([])).toEqual(['global-lock']);
  });

  it.each([
    [42, 'coupon:42'],
    [-1.5, 'coupon:-1.5'],
    [0, 'coupon:0'],
    [-0, 'coupon:0'],
    [1e21, 'coupon:1e%2B21'],
    [12345678901234567890n, 'coupon:12345678901234567890'],
    [-3n, 'coupon:-3'],
    ['abc', 'coupon:abc'],
  ])('accepts %s', (value, key) => {
    expect(compileLockKeys('coupon:<0>').resolve([value])).toEqual([key]);
  });

  it('follows property paths through nested objects and arrays', () => {
    const order = {
      user: { id: 7, $tenant: 'acme', _region: 'eu' },
      items: [{ sku: 'A-1' }, { sku: 'B-2' }],
    };
    const keys = compileLockKeys(
      'order:<0.user.$tenant>:<0.user._region>:<0.user.id>:<0.items.1.sku>:<1.0.0>',
    );

    expect(keys.resolve([order, [['x']]])).toEqual(['order:acme:eu:7:B-2:x']);
  });

  it('reads inherited properties, getters included', () => {
    class Coupon {
      constructor(private readonly code: string) {}
      get id(): string {
        return this.code.toUpperCase();
      }
    }

    expect(
      compileLockKeys('coupon:<0.id>').resolve([new Coupon('spring')]),
    ).toEqual(['coupon:SPRING']);
  });

  it('builds one key per template, deduplicated in order', () => {
    const keys = compileLockKeys([
      'b:<1>',
      'a:<0>',
      'b:<1>',
      'user:<0>',
      'user:<1>',
    ]);

    expect(keys.resolve([1, 2])).toEqual(['b:2', 'a:1', 'user:1', 'user:2']);
    expect(keys.resolve([5, 5])).toEqual(['b:5', 'a:5', 'user:5']);
  });

  it('gives the same key for a number, its string and its bigint', () => {
    const keys = compileLockKeys('coupon:<0>');

    expect(keys.resolve([1])).toEqual(keys.resolve(['1']));
    expect(keys.resolve([1n])).toEqual(keys.resolve(['1']));
  });
});

describe('compileLockKeys: values a placeholder rejects', () => {
  it.each([
    [undefined, 'undefined'],
    [null, 'null'],
    ['', 'an empty string'],
    [true, 'a boolean'],
    [false, 'a boolean'],
    [{}, 'an object'],
    [{ id: 1 }, 'an object'],
    [new Date(0), 'an object'],
    [Object.create(null), 'an object'],
    [[], 'an array'],
    [[1], 'an array'],
    [() => 1, 'a function'],
    [Symbol('id'), 'a symbol'],
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    [Number.NEGATIVE_INFINITY, '-Infinity'],
  ])('rejects %s', (value, description) => {
    const error = keyErrorFrom('coupon:<0.id>', [{ id: value }]);

    expect(error).toMatchObject({
      message: `Cannot build lock key from template "coupon:<0.id>" on CouponController.buy: placeholder <0.id> resolved to ${description}; expected a non-empty string, a finite number or a bigint`,
      code: 'LOCK_KEY_INVALID',
      template: 'coupon:<0.id>',
      placeholder: '<0.id>',
    });
  });

  it('never puts the rejected value itself in the message', () => {
    const secret = {
      password: 'hunter2',
      toString: () => 'hunter2',
      toJSON: () => 'hunter2',
    };

    expect(keyErrorFrom('user:<0>', [secret]).message).not.toContain('hunter2');
  });

  it('says when the method received fewer arguments than the template reads', () => {
    expect(keyErrorFrom('coupon:<0>:<1>', ['a']).message).toContain(
      'placeholder <1> resolved to undefined (the method received 1 argument)',
    );
    expect(keyErrorFrom('coupon:<2.id>', [1, 2]).message).toContain(
      'placeholder <2.id> cannot read "id" because <2> is undefined (the method received 2 arguments)',
    );
  });

  it('reports null or undefined along a path as a key error, not a TypeError', () => {
    expect(keyErrorFrom('order:<0.user.id>', [{ user: null }])).toMatchObject({
      message: expect.stringContaining(
        'placeholder <0.user.id> cannot read "id" because <0.user> is null',
      ),
      placeholder: '<0.user.id>',
    });
    expect(keyErrorFrom('order:<0.user.id>', [undefined]).message).toContain(
      'placeholder <0.user.id> cannot read "user" because <0> is undefined',
    );
    expect(
      keyErrorFrom('order:<0.items.3.sku>', [{ items: [] }]).message,
    ).toContain('cannot read "sku" because <0.items.3> is undefined');
  });

  it('turns a throwing getter into a key error with the original as cause', () => {
    const failure = new Error('boom');
    const order = {
      get id(): string {
        throw failure;
      },
    };
    const error = keyErrorFrom('order:<0.id>', [order]);

    expect(error.message).toContain(
      'placeholder <0.id> threw while reading "id"',
    );
    expect(error.cause).toBe(failure);
  });

  it('turns a throwing proxy trap into a key error', () => {
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new TypeError('trap');
        },
      },
    );

    expect(keyErrorFrom('order:<0.id>', [hostile]).cause).toBeInstanceOf(
      TypeError,
    );
  });

  it('describes a revoked proxy without touching it', () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();

    expect(keyErrorFrom('order:<0>', [proxy]).message).toContain(
      'resolved to an object',
    );
  });

  it('rejects a string with an unpaired surrogate', () => {
    const error = keyErrorFrom('user:<0>', ['ab\ud800']);

    expect(error.message).toContain(
      'placeholder <0> resolved to a string with an unpaired surrogate',
    );
    expect(error.cause).toBeInstanceOf(URIError);
  });
});

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

describe('compileLockKeys: function form', () => {
  it('calls the function with the arguments and keeps a string result', () => {
    const keyFunction = vi.fn(
      (userId: string, couponId: number) => `coupon:${couponId}:user:${userId}`,
    );
    const keys = compileLockKeys(keyFunction, origin);

    expect(keys.resolve(['u1', 9])).toEqual(['coupon:9:user:u1']);
    expect(keyFunction).toHaveBeenCalledWith('u1', 9);
  });

  it('accepts several keys and deduplicates them with the templates', () => {
    const keys = compileLockKeys([
      'account:<0>',
      (from: string, to: string) => [
        `account:${from}`,
        `account:${to}`,
        `account:${to}`,
      ],
    ]);

    expect(keys.resolve(['a', 'b'])).toEqual(['account:a', 'account:b']);
  });

  it('does not encode what the function returns', () => {
    expect(compileLockKeys(() => 'order:1:admin %').resolve([])).toEqual([
      'order:1:admin %',
    ]);
  });

  it('wraps an error thrown by the function, keeping it as cause', () => {
    const failure = new RangeError('no such order');
    function findOrderKey(): string {
      throw failure;
    }
    const error = keyErrorFrom(findOrderKey, []);

    expect(error).toMatchObject({
      message:
        'Cannot build lock key from [function findOrderKey] on CouponController.buy: the key function threw (see cause)',
      template: '[function findOrderKey]',
      cause: failure,
    });
  });

  it.each([
    [undefined, 'returned undefined; expected a string or an array of strings'],
    [null, 'returned null; expected a string or an array of strings'],
    [42, 'returned a number; expected a string or an array of strings'],
    [{}, 'returned an object; expected a string or an array of strings'],
    [
      Promise.resolve('x'),
      'returned an object; expected a string or an array of strings',
    ],
    [[], 'returned no key'],
    [['a', 1], 'returned a number at index 1; expected a string'],
    [['a', null], 'returned null at index 1; expected a string'],
    ['', 'returned an invalid key "": it is empty'],
    [['a', ''], 'returned an invalid key "": it is empty'],
    [
      'coupon:{1}',
      'returned an invalid key "coupon:{1}": "{" at position 7 is reserved for Redis Cluster hash tags',
    ],
    [
      'coupon}',
      'returned an invalid key "coupon}": "}" at position 6 is reserved for Redis Cluster hash tags',
    ],
    [
      'coupon:\t1',
      'returned an invalid key "coupon:\\t1": control character U+0009 at position 7',
    ],
    [
      'coupon:\udc00',
      'returned an invalid key "coupon:\\udc00": unpaired surrogate at position 7',
    ],
  ])('rejects a result of %j', (result, problem) => {
    const error = keyErrorFrom(() => result as string, []);

    expect(error.message).toBe(
      `Cannot build lock key from [function anonymous] on CouponController.buy: the key function ${problem}`,
    );
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

describe('property: a resolved key never contains a placeholder that went wrong', () => {
  it('either throws LockKeyError or builds the exact, clean key', () => {
    const random = randomGenerator(42);
    const pick = <T>(items: readonly T[]): T =>
      items[Math.floor(random() * items.length)];
    // No letters that could spell "undefined", "null" or "object" by chance.
    const alphabet = [...'ax7:{}% -_.~é😀\n<>'];
    const validValues: (() => unknown)[] = [
      () =>
        Array.from({ length: 1 + Math.floor(random() * 6) }, () =>
          pick(alphabet),
        ).join(''),
      () => Math.floor(random() * 1e6) - 5e5,
      () => random() * 100,
      () => BigInt(Math.floor(random() * 1e9)),
    ];
    const invalidValues: (() => unknown)[] = [
      () => undefined,
      () => null,
      () => '',
      () => ({ id: 1 }),
      () => [1, 2],
      () => true,
      () => Number.NaN,
      () => Number.POSITIVE_INFINITY,
      () => Symbol('x'),
      () => () => 'x',
      () => new Date(0),
    ];
    const keys = compileLockKeys('p:<0>:<1.a.b>:<2.1>', origin);
    let built = 0;

    for (let run = 0; run < 3_000; run++) {
      const values = [0, 1, 2].map(() =>
        random() < 0.75 ? pick(validValues)() : pick(invalidValues)(),
      );
      // Sometimes break the path itself rather than the value at its end.
      const container =
        random() < 0.1 ? pick([null, undefined, 'str', 5]) : { b: values[1] };
      const args = [values[0], { a: container }, ['skip', values[2]]];
      const pathIsIntact = typeof container === 'object' && container !== null;

      let key: string;
      try {
        [key] = keys.resolve(args);
      } catch (error) {
        expect(error).toBeInstanceOf(LockKeyError);
        expect(values.every(isUsableKeyValue) && pathIsIntact).toBe(false);
        continue;
      }
      built++;
      expect(values.every(isUsableKeyValue) && pathIsIntact).toBe(true);
      expect(key).toBe(
        `p:${values.map((value) => encodeURIComponent(String(value))).join(':')}`,
      );
      expect(key).not.toMatch(/undefined|null|object|NaN|Infinity|[{}\s]/);
    }
    expect(built).toBeGreaterThan(500);
  });
});

describe('value boundaries', () => {
  it.each(['<0>-<1>', '<0><1>', 'user-<0>x', '<0>.<1>', 'a<0>_'])(
    'rejects %j at startup: the end of a value would be ambiguous',
    (template) => {
      expect(() =>
        compileLockKeys(template, { className: 'C', methodName: 'm' }),
      ).toThrow(/must end the template or be followed by a separator/);
    },
  );

  it.each(['<0>:<1>', 'seat:<0>/<1>', 'x:<0>', '<0>|tail', '<0> <1>'])(
    'accepts %j',
    (template) => {
      expect(() => compileLockKeys(template)).not.toThrow();
    },
  );

  it('keeps distinct argument lists apart when separated by ":"', () => {
    const keys = compileLockKeys('<0>:<1>');
    expect(keys.resolve(['a:b', 'c'])).not.toEqual(keys.resolve(['a', 'b:c']));
  });
});
