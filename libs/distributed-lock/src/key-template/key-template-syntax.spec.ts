import { LockTemplateError } from '../errors/lock-errors.js';
import { compileLockKeys, DEFAULT_MAX_KEY_LENGTH } from './index.js';
import { origin, thrownBy } from './key-template.test-support.js';

function keyForOrder(orderId: string): string {
  return `order:${orderId}`;
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
