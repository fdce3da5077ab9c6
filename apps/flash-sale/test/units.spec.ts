import { HttpException, NotFoundException } from '@nestjs/common';
import {
  LockBackendError,
  LockKeyError,
  LockNotAcquiredError,
} from '@app/distributed-lock';
import { AppException } from '../src/common/app-exception.js';
import { toAppException } from '../src/common/app-exception.filter.js';
import { isInfrastructureError } from '../src/common/infrastructure-errors.js';
import { LimitPipe } from '../src/common/pipes/limit.pipe.js';
import { PositiveIntPipe } from '../src/common/pipes/positive-int.pipe.js';
import { UserIdPipe } from '../src/common/pipes/user-id.pipe.js';
import {
  ConfigError,
  loadConfig,
  mergeConfig,
} from '../src/config/app-config.js';
import { CreateCouponPipe } from '../src/coupon/create-coupon.pipe.js';
import { saleState, type Coupon } from '../src/coupon/coupon.types.js';

function codeOf(call: () => unknown): string | undefined {
  try {
    call();
  } catch (error) {
    if (error instanceof AppException) return error.code;
    throw error;
  }
  return undefined;
}

describe('pipes', () => {
  it('PositiveIntPipe takes canonical positive integers only', () => {
    const pipe = new PositiveIntPipe('couponId');
    expect(pipe.transform('7')).toBe(7);
    expect(pipe.transform('2147483647')).toBe(2_147_483_647);
    for (const bad of [
      '0',
      '07',
      '-1',
      '1.0',
      '1e3',
      ' 1',
      'abc',
      '',
      '2147483648',
      undefined,
      5,
    ]) {
      expect(codeOf(() => pipe.transform(bad))).toBe('BAD_REQUEST');
    }
  });

  it('UserIdPipe takes 1 to 64 of [A-Za-z0-9_-]', () => {
    const pipe = new UserIdPipe();
    expect(pipe.transform('user_1-A')).toBe('user_1-A');
    expect(pipe.transform('x'.repeat(64))).toBe('x'.repeat(64));
    for (const bad of [
      undefined,
      '',
      'x'.repeat(65),
      'a b',
      'a,b',
      'é',
      ['a', 'b'],
      '../x',
    ]) {
      expect(codeOf(() => pipe.transform(bad))).toBe('BAD_REQUEST');
    }
  });

  it('LimitPipe defaults to 100 and accepts 1..1000', () => {
    const pipe = new LimitPipe();
    expect(pipe.transform(undefined)).toBe(100);
    expect(pipe.transform('1')).toBe(1);
    expect(pipe.transform('1000')).toBe(1000);
    for (const bad of ['0', '1001', 'ten', '', '1.5', ['1', '2']]) {
      expect(codeOf(() => pipe.transform(bad))).toBe('BAD_REQUEST');
    }
  });

  it('CreateCouponPipe fills in the window and refuses bad values', () => {
    const now = new Date('2030-05-01T00:00:00Z');
    const pipe = new CreateCouponPipe(() => now);
    expect(pipe.transform({ name: 'A', price: 0.1, stock: 0 })).toEqual({
      name: 'A',
      price: 0.1,
      stock: 0,
      startAt: now,
      endAt: new Date('2030-05-02T00:00:00Z'),
    });
    expect(
      pipe.transform({
        name: 'A',
        price: 19.99,
        stock: 1_000_000,
        endAt: '2030-05-01T06:00:00.123Z',
      }).endAt,
    ).toEqual(new Date('2030-05-01T06:00:00.123Z'));
    const bad = [
      null,
      [],
      'text',
      { price: 1, stock: 1 },
      { name: 'A', price: 0.005, stock: 1 },
      { name: 'A', price: Number.NaN, stock: 1 },
      { name: 'A', price: 1e12, stock: 1 },
      { name: 'A', price: 1, stock: 1, endAt: '2030-04-30T00:00:00Z' },
      { name: 'A', price: 1, stock: 1, startAt: 1_900_000_000_000 },
    ];
    for (const body of bad) {
      expect(codeOf(() => pipe.transform(body))).toBe('BAD_REQUEST');
    }
  });
});

describe('error mapping', () => {
  it('maps lock errors to BUSY 429 with Retry-After, BAD_REQUEST and UNAVAILABLE', () => {
    const busy = toAppException(new LockNotAcquiredError('coupon:1', 10));
    expect([busy.code, busy.getStatus(), busy.retryAfter]).toEqual([
      'BUSY',
      429,
      1,
    ]);
    expect(toAppException(new LockKeyError('bad key')).code).toBe(
      'BAD_REQUEST',
    );
    const down = toAppException(new LockBackendError('redis down'));
    expect([down.code, down.getStatus()]).toEqual(['UNAVAILABLE', 503]);
    expect(down.body.message).not.toContain('redis down');
  });

  it("maps Nest's and Express's errors to the app's shape", () => {
    expect(toAppException(new NotFoundException()).body).toMatchObject({
      ok: false,
      code: 'NOT_FOUND',
    });
    const parse = Object.assign(new SyntaxError('Unexpected token'), {
      status: 400,
      expose: true,
    });
    expect(toAppException(parse).code).toBe('BAD_REQUEST');
    expect(toAppException(new HttpException('teapot', 418)).getStatus()).toBe(
      400,
    );
  });

  it('answers 503 for unreachable backends and 500 for bugs', () => {
    const refused = Object.assign(
      new Error('connect ECONNREFUSED 127.0.0.1:5432'),
      { code: 'ECONNREFUSED' },
    );
    expect(toAppException(refused).code).toBe('UNAVAILABLE');
    expect(
      isInfrastructureError(new Error('Connection terminated unexpectedly')),
    ).toBe(true);
    expect(
      isInfrastructureError(Object.assign(new Error('x'), { code: '57P01' })),
    ).toBe(true);
    expect(
      isInfrastructureError(Object.assign(new Error('x'), { code: '23505' })),
    ).toBe(false);
    const bug = toAppException(new TypeError('undefined is not a function'));
    expect([bug.code, bug.getStatus()]).toEqual(['INTERNAL_ERROR', 500]);
    expect(bug.body.message).toBe('Internal server error');
  });
});

describe('configuration', () => {
  it('has defaults for everything', () => {
    const config = loadConfig({}, '/srv/app');
    expect(config).toMatchObject({
      port: 3000,
      redisUrl: undefined,
      databaseUrl: undefined,
      embeddedDb: { port: 54329, dataDir: '/srv/app/.data/flash-sale-db' },
      localRedis: { enabled: true, port: 6390 },
      seckill: { waitTime: 10_000, sessionTtl: 5_000 },
      backendTimeout: 2_000,
    });
  });

  it('reads the environment and fails fast on malformed values', () => {
    const config = loadConfig(
      {
        PORT: '8080',
        REDIS_URL: 'redis://cache:6379/2',
        DATABASE_URL: 'postgres://u@db/shop',
        SECKILL_WAIT_MS: '250',
        SECKILL_SESSION_TTL_MS: '1000',
        LOCAL_REDIS: 'off',
      },
      '/srv',
    );
    expect(config).toMatchObject({
      port: 8080,
      redisUrl: 'redis://cache:6379/2',
      databaseUrl: 'postgres://u@db/shop',
      seckill: { waitTime: 250, sessionTtl: 1_000 },
      localRedis: { enabled: false },
    });
    expect(() => loadConfig({ PORT: 'http' })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: '70000' })).toThrow(/PORT/);
    expect(() => loadConfig({ REDIS_URL: 'http://x' })).toThrow(/REDIS_URL/);
    expect(() => loadConfig({ DATABASE_URL: 'nonsense' })).toThrow(
      /DATABASE_URL/,
    );
    expect(() => loadConfig({ LOCAL_REDIS: 'maybe' })).toThrow(/LOCAL_REDIS/);
    expect(() => loadConfig({ SECKILL_SESSION_TTL_MS: '50' })).toThrow(
      /SECKILL_SESSION_TTL_MS/,
    );
  });

  it('merges overrides group by group', () => {
    const merged = mergeConfig(loadConfig({}, '/x'), {
      seckill: { waitTime: 5 },
      embeddedDb: { port: 1234 },
    });
    expect(merged.seckill.waitTime).toBe(5);
    expect(merged.embeddedDb).toMatchObject({
      port: 1234,
      dataDir: '/x/.data/flash-sale-db',
    });
  });
});

describe('sale window', () => {
  const coupon: Coupon = {
    id: 1,
    name: 'c',
    price: 1,
    stock: 1,
    startAt: new Date('2030-01-01T00:00:00Z'),
    endAt: new Date('2030-01-02T00:00:00Z'),
    status: 'active',
  };

  it('is open from startAt (inclusive) to endAt (exclusive)', () => {
    expect(saleState(coupon, new Date('2029-12-31T23:59:59Z'))).toBe(
      'upcoming',
    );
    expect(saleState(coupon, coupon.startAt)).toBe('on_sale');
    expect(saleState(coupon, coupon.endAt)).toBe('ended');
    expect(saleState({ ...coupon, status: 'disabled' }, coupon.startAt)).toBe(
      'disabled',
    );
  });
});
