/**
 * The module's options that shape error answers: statuses, Retry-After and
 * mapError.
 */
import { HttpException } from '@nestjs/common';
import {
  LockNotAcquiredError,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import {
  CouponController,
  CouponInputController,
} from '../fixtures/controllers.js';
import { busyBody, invalidKeyBody } from '../fixtures/expected-bodies.js';
import { createHttpApp, send, type HttpApp } from '../fixtures/http-app.js';
import type { HttpLockSuite } from '../fixtures/http-lock-suite.js';

/**
 * Registers, in the calling `describe`, an app of its own on `h`'s Redis with
 * `lockOptions`, and returns it with a helper for a 'busy' answer.
 */
function configured(
  h: HttpLockSuite,
  lockOptions: Omit<DistributedLockModuleOptions, 'redis'>,
) {
  const app = { current: undefined as HttpApp | undefined };
  beforeAll(async () => {
    app.current = await createHttpApp({
      adapter: h.adapter,
      redisUrl: h.server.url,
      lockOptions,
      controllers: [CouponController, CouponInputController],
    });
  });
  afterAll(async () => {
    await app.current?.close();
  });
  /** A 'busy' answer: the request while another holds coupon:<id>. */
  return {
    app: () => app.current!,
    busy: async (id: number) => {
      const target = app.current!;
      const release = target.probe.hold(`coupon:${id}`);
      const first = send(target, `/coupons/${id}`);
      try {
        await target.probe.entered(`coupon:${id}`);
        return await send(target, `/coupons/${id}`);
      } finally {
        release();
        expect((await first).status).toBe(201);
      }
    },
  };
}

export function describeErrorMapping(h: HttpLockSuite): void {
  describe('configurable error mapping', () => {
    describe('statuses and a fixed Retry-After', () => {
      const config = configured(h, {
        statuses: { notAcquired: 429, invalidKey: 422 },
        retryAfter: 7,
      });

      it('answers busy with 429 and Retry-After: 7', async () => {
        const response = await config.busy(11);
        expect(response.status).toBe(429);
        expect(response.body).toEqual({
          ...busyBody('coupon:11'),
          statusCode: 429,
          error: 'Too Many Requests',
        });
        expect(response.headers['retry-after']).toBe('7');
      });

      it('answers a bad key with the configured 422', async () => {
        const response = await send(config.app(), '/coupon-from/query');
        expect(response.status).toBe(422);
        expect(response.body).toEqual({
          ...invalidKeyBody,
          statusCode: 422,
          error: 'Unprocessable Entity',
        });
      });
    });

    describe('retryAfter: false', () => {
      const config = configured(h, { retryAfter: false });

      it('sends no Retry-After header', async () => {
        const response = await config.busy(12);
        expect(response.status).toBe(409);
        expect(response.body).toEqual(busyBody('coupon:12'));
        expect(response.headers).not.toHaveProperty('retry-after');
      });
    });

    describe('mapError', () => {
      const seen: Array<{ code: string; type: string }> = [];
      const config = configured(h, {
        mapError: (error, context) => {
          seen.push({ code: error.code, type: context.getType() });
          if (!(error instanceof LockNotAcquiredError)) return undefined;
          return new HttpException(
            { statusCode: 423, reason: 'locked', resource: error.key },
            423,
          );
        },
      });

      it('throws the HttpException mapError returns', async () => {
        const response = await config.busy(13);
        expect(response.status).toBe(423);
        expect(response.body).toEqual({
          statusCode: 423,
          reason: 'locked',
          resource: 'coupon:13',
        });
        // The retry hint survives a custom body.
        expect(response.headers['retry-after']).toBe('1');
        expect(seen).toContainEqual({
          code: 'LOCK_NOT_ACQUIRED',
          type: 'http',
        });
      });

      it('falls back to the default mapping when mapError returns undefined', async () => {
        const response = await send(config.app(), '/coupon-from/query');
        expect(response.status).toBe(400);
        expect(response.body).toEqual(invalidKeyBody);
        expect(seen).toContainEqual({
          code: 'LOCK_KEY_INVALID',
          type: 'http',
        });
      });
    });
  });
}
