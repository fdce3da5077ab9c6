/**
 * With Redis gone, locked routes answer 503 quickly and recover once it is back.
 */
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../../test/support/redis-server.js';
import { CouponController } from '../fixtures/controllers.js';
import { eventually } from '../fixtures/eventually.js';
import {
  createHttpApp,
  send,
  type HttpApp,
  type Response,
} from '../fixtures/http-app.js';
import type { HttpLockSuite } from '../fixtures/http-lock-suite.js';

export function describeRedisUnreachable(h: HttpLockSuite): void {
  describe('Redis unreachable', () => {
    let downServer: RedisServerHandle;
    let down: HttpApp;

    beforeAll(async () => {
      downServer = await startRedisServer();
      down = await createHttpApp({
        adapter: h.adapter,
        redisUrl: downServer.url,
        lockOptions: { commandTimeout: 500 },
        controllers: [CouponController],
      });
    });

    afterAll(async () => {
      await downServer?.restart();
      await down?.close();
      await downServer?.stop();
    });

    it('answers 503 with Retry-After quickly, and recovers once Redis is back', async () => {
      expect((await send(down, '/coupons/5')).status).toBe(201);
      await downServer.stop();

      // A Promise handler, its second try, and an Observable handler.
      for (const path of ['/coupons/5', '/coupons/5', '/coupons/5/stream']) {
        const startedAt = Date.now();
        const response = await send(down, path);
        expect(Date.now() - startedAt).toBeLessThan(3_000);
        expect(response.status).toBe(503);
        expect(response.body).toEqual({
          statusCode: 503,
          error: 'Service Unavailable',
          message: expect.any(String),
          code: 'LOCK_BACKEND_UNAVAILABLE',
        });
        expect(response.body.message).not.toContain(String(downServer.port));
        expect(response.headers['retry-after']).toBe('1');
      }
      expect(down.probe.events).toEqual([
        'enter coupon:5 -',
        'exit coupon:5 -',
      ]);

      await downServer.restart();
      let last: Response | undefined;
      await eventually(
        async () => {
          last = await send(down, '/coupons/5');
          return last.status === 201;
        },
        10_000,
        'a request succeeding after the restart',
      );
      expect(last?.body).toEqual({ id: 5, keys: ['coupon:5'] });
    });
  });
}
