import { compileLockKeys } from './index.js';
import { keyErrorFrom, origin } from './key-template.test-support.js';

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
