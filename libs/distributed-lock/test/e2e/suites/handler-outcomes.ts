/**
 * How the lock ends with the handler: held until an Observable completes or
 * errors, released when the handler throws.
 */
import { eventually } from '../fixtures/eventually.js';
import { busyBody } from '../fixtures/expected-bodies.js';
import { send } from '../fixtures/http-app.js';
import type { HttpLockSuite } from '../fixtures/http-lock-suite.js';

export function describeObservableHandlers(h: HttpLockSuite): void {
  describe('Observable handlers', () => {
    it('holds the lock until a declared Observable completes', async () => {
      const release = h.probe.hold('stream:3');
      const stream = send(h, '/coupons/3/stream');
      await h.probe.entered('stream:3');
      expect(await h.locks.isLocked('coupon:3')).toBe(true);
      const busy = await send(h, '/coupons/3');
      expect(busy.status).toBe(409);
      expect(busy.body).toEqual(busyBody('coupon:3'));
      // The same stream route, refused while the first stream runs.
      const busyStream = await send(h, '/coupons/3/stream');
      expect(busyStream.status).toBe(409);
      expect(busyStream.body).toEqual(busyBody('coupon:3'));
      expect(busyStream.headers['retry-after']).toBe('1');

      release();
      const response = await stream;
      expect(response.status).toBe(201);
      expect(response.body).toEqual([0, 1, 2, 3, 4]);
      await eventually(
        async () => !(await h.locks.isLocked('coupon:3')),
        5_000,
        'coupon:3 released',
      );
      expect((await send(h, '/coupons/3')).status).toBe(201);
    });

    it('releases the lock when the stream errors, with the error status', async () => {
      const release = h.probe.hold('stream:4');
      const stream = send(h, '/coupons/4/stream-error');
      await h.probe.entered('stream:4');
      expect(await h.locks.isLocked('coupon:4')).toBe(true);
      expect((await send(h, '/coupons/4')).status).toBe(409);

      release();
      const response = await stream;
      expect(response.status).toBe(422);
      expect(response.body).toMatchObject({
        statusCode: 422,
        message: 'Stream 4 failed',
      });
      await eventually(
        async () => !(await h.locks.isLocked('coupon:4')),
        5_000,
        'coupon:4 released',
      );
      expect((await send(h, '/coupons/4')).status).toBe(201);
    });

    it('holds the lock for an Observable returned without being declared', async () => {
      const release = h.probe.hold('stream:5');
      const stream = send(h, '/coupons/5/stream-undeclared');
      await h.probe.entered('stream:5');
      expect((await send(h, '/coupons/5')).status).toBe(409);

      release();
      const response = await stream;
      expect(response.status).toBe(201);
      expect(response.body).toEqual([0, 1, 2]);
      await eventually(
        async () => !(await h.locks.isLocked('coupon:5')),
        5_000,
        'coupon:5 released',
      );
    });
  });
}

export function describeHandlerErrors(h: HttpLockSuite): void {
  describe('errors thrown by the handler', () => {
    it('releases the lock when an Observable handler throws before returning', async () => {
      const response = await send(h, '/coupons/10/stream-throws');
      expect(response.status).toBe(404);
      expect(response.body).toEqual({
        statusCode: 404,
        error: 'Not Found',
        message: 'Stream 10 does not exist',
      });
      await eventually(
        async () => !(await h.locks.isLocked('coupon:10')),
        5_000,
        'coupon:10 released',
      );
      expect((await send(h, '/coupons/10')).status).toBe(201);
    });

    it('passes an HttpException through and releases the lock', async () => {
      const release = h.probe.hold('coupon:9');
      const failing = send(h, '/coupons/9/not-found');
      await h.probe.entered('coupon:9', 'not-found');
      expect((await send(h, '/coupons/9')).status).toBe(409);

      release();
      const response = await failing;
      expect(response.status).toBe(404);
      expect(response.body).toEqual({
        statusCode: 404,
        error: 'Not Found',
        message: 'Coupon 9 does not exist',
      });
      expect(await h.locks.isLocked('coupon:9')).toBe(false);
      expect((await send(h, '/coupons/9')).status).toBe(201);
    });
  });
}
