import { LockKeyError } from '../errors/lock-errors.js';
import { compileLockKeys } from './index.js';
import {
  keyErrorFrom,
  origin,
  randomGenerator,
} from './key-template.test-support.js';

/** What a placeholder accepts, restated independently of the implementation. */
function isUsableKeyValue(value: unknown): boolean {
  return (
    (typeof value === 'string' && value !== '') ||
    (typeof value === 'number' && Number.isFinite(value)) ||
    typeof value === 'bigint'
  );
}

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
