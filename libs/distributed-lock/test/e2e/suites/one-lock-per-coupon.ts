/**
 * One lock per coupon: concurrent requests for one id are refused with 409
 * (or queue, with a waitTime); different ids run in parallel.
 */
import { busyBody } from '../fixtures/expected-bodies.js';
import { eventually } from '../fixtures/eventually.js';
import { send } from '../fixtures/http-app.js';
import type { HttpLockSuite } from '../fixtures/http-lock-suite.js';

export function describeOneLockPerCoupon(h: HttpLockSuite): void {
  describe('one lock per coupon', () => {
    it('answers one of two concurrent requests 201 and the other 409 with Retry-After', async () => {
      const release = h.probe.hold('coupon:7');
      const first = send(h, '/coupons/7', { tag: 'a' });
      await h.probe.entered('coupon:7', 'a');
      expect(await h.locks.isLocked('coupon:7')).toBe(true);

      const second = await send(h, '/coupons/7', { tag: 'b' });
      expect(second.status).toBe(409);
      expect(second.body).toEqual(busyBody('coupon:7'));
      expect(second.headers['retry-after']).toBe('1');
      expect(second.headers['content-type']).toMatch(/application\/json/);

      release();
      const firstResponse = await first;
      expect(firstResponse.status).toBe(201);
      expect(firstResponse.body).toEqual({ id: 7, keys: ['coupon:7'] });
      expect(h.probe.events).toEqual(['enter coupon:7 a', 'exit coupon:7 a']);
      // The wrapper releases before the response is written.
      expect(await h.locks.isLocked('coupon:7')).toBe(false);
    });

    it('runs requests for different ids in parallel', async () => {
      const releaseOne = h.probe.hold('coupon:1');
      const releaseTwo = h.probe.hold('coupon:2');
      const one = send(h, '/coupons/1');
      const two = send(h, '/coupons/2');
      // Both handlers are inside at the same time.
      await h.probe.entered('coupon:1');
      await h.probe.entered('coupon:2');
      expect(h.probe.events.filter((e) => e.startsWith('exit'))).toEqual([]);
      releaseOne();
      releaseTwo();
      expect((await one).status).toBe(201);
      expect((await two).status).toBe(201);
    });

    it('queues the second request when the route has a waitTime', async () => {
      const release = h.probe.hold('coupon:8');
      const first = send(h, '/coupons/8/queued', { tag: 'a' });
      await h.probe.entered('coupon:8', 'a');
      const second = send(h, '/coupons/8/queued', { tag: 'b' });
      // The second request is waiting in the lock's queue, not in the handler.
      await eventually(
        async () => (await h.redis.llen('lock:{coupon:8}:queue')) === 1,
        5_000,
        'the second request queuing',
      );
      expect(h.probe.events).toEqual(['enter coupon:8 a']);

      release();
      const [firstResponse, secondResponse] = await Promise.all([
        first,
        second,
      ]);
      expect(firstResponse.status).toBe(201);
      expect(secondResponse.status).toBe(201);
      expect(secondResponse.body).toEqual({ id: 8, keys: ['coupon:8'] });
      expect(h.probe.events).toEqual([
        'enter coupon:8 a',
        'exit coupon:8 a',
        'enter coupon:8 b',
        'exit coupon:8 b',
      ]);
    });
  });
}
