/**
 * A request whose lock key cannot be built is answered 400 before anything
 * reaches Redis (checked with MONITOR), and valid requests only ever lock
 * well-formed keys.
 */
import {
  clearAllButSessions,
  keysButSessions,
} from '../../../../../test/support/clear-keys.js';
import { eventually } from '../fixtures/eventually.js';
import { invalidKeyBody } from '../fixtures/expected-bodies.js';
import { send, type SendInit } from '../fixtures/http-app.js';
import type { HttpLockSuite } from '../fixtures/http-lock-suite.js';
import { RedisMonitor } from '../fixtures/redis-monitor.js';

export function describeInvalidKeys(h: HttpLockSuite): void {
  describe('keys come from the arguments after pipes, never the raw request', () => {
    let monitor: RedisMonitor;

    beforeAll(async () => {
      monitor = await RedisMonitor.start(h.server.url);
    });

    beforeEach(async () => {
      await clearAllButSessions(h.redis);
      await monitor.sync();
      monitor.clear();
    });

    afterAll(async () => {
      await monitor?.stop();
    });

    const invalid: Array<[string, string, SendInit]> = [
      ['a body without the field', '/keys/orders', { body: {} }],
      ['a null body field', '/keys/orders', { body: { userId: null } }],
      ['an empty body field', '/keys/orders', { body: { userId: '' } }],
      [
        'an object body field',
        '/keys/orders',
        { body: { userId: { secret: 'hunter2' } } },
      ],
      ['no body at all', '/keys/orders', {}],
      ['an array body field', '/keys/orders', { body: { userId: [1, 2] } }],
      ['a missing header', '/keys/profile', {}],
      ['an empty header', '/keys/profile', { headers: { userid: '' } }],
      ['the whole body in <0>', '/coupon-from/body', { body: { id: 7 } }],
      ['a missing query parameter', '/coupon-from/query', {}],
      ['an empty query parameter', '/coupon-from/query?id=', {}],
      ['a repeated query parameter', '/coupon-from/query?id=1&id=2', {}],
      ['a missing header in <0>', '/coupon-from/header', {}],
      ['a key function that throws', '/keys/cart', { body: { basket: [] } }],
      [
        'a value making the key too long',
        '/keys/profile',
        { headers: { userid: 'x'.repeat(600) } },
      ],
    ];

    it.each(invalid)(
      'answers 400 LOCK_KEY_INVALID for %s and writes nothing to Redis',
      async (_case, path, init) => {
        const response = await send(h, path, init);
        expect(response.status).toBe(400);
        expect(response.body).toEqual(invalidKeyBody);
        // The message names the template, never the user's value.
        expect(response.body.message).toMatch(/template|key function/);
        expect(response.body.message).not.toContain('hunter2');
        expect(response.body.message).not.toContain('xxxxxxxxxx');
        expect(h.probe.events).toEqual([]);

        // Not even an attempt reached Redis.
        await monitor.sync();
        expect(monitor.lockKeys()).toEqual([]);
        expect(monitor.scriptsRun()).toBe(0);
        expect(await keysButSessions(h.redis)).toEqual([]);
      },
    );

    it('lets ParseIntPipe reject a bad id before any lock is tried', async () => {
      const response = await send(h, '/coupons/abc');
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({
        statusCode: 400,
        error: 'Bad Request',
      });
      expect(response.body).not.toHaveProperty('code');
      await monitor.sync();
      expect(monitor.lockKeys()).toEqual([]);
      expect(monitor.scriptsRun()).toBe(0);
      expect(await keysButSessions(h.redis)).toEqual([]);
    });

    it('only ever locks well-formed coupon keys for valid requests', async () => {
      const release = h.probe.hold('coupon:1');
      const held = send(h, '/coupons/1');
      await h.probe.entered('coupon:1');
      const responses = await Promise.all([
        send(h, '/coupons/1'), // 409
        send(h, '/coupons/2'),
        send(h, '/coupons/003'),
        send(h, '/coupons/4/stream'),
        send(h, '/coupon-from/query?id=5'),
        send(h, '/coupon-from/header', { headers: { couponid: '6' } }),
      ]);
      const queued = send(h, '/coupons/1/queued');
      await eventually(
        async () => (await h.redis.llen('lock:{coupon:1}:queue')) === 1,
        5_000,
        'a queued request',
      );
      release();
      responses.push(await held, await queued);
      expect(responses.map((response) => response.status).toSorted()).toEqual([
        201, 201, 201, 201, 201, 201, 201, 409,
      ]);

      await monitor.sync();
      const keys = monitor.lockKeys();
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) {
        expect(key).toMatch(/^lock:\{coupon:\d+\}(?::fence|:queue|:bypass)?$/);
        expect(key).not.toMatch(/undefined|object|null/i);
      }
      const locked = new Set(
        keys.map((key) => /^lock:\{coupon:\d+\}/.exec(key)?.[0]),
      );
      expect([...locked].toSorted()).toEqual(
        [1, 2, 3, 4, 5, 6].map((id) => `lock:{coupon:${id}}`),
      );
    });
  });
}
