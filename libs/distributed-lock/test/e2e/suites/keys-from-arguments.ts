/**
 * Which keys a request locks: templates filled from the body, headers and
 * route parameters (after pipes), arrays of templates, key functions, and
 * user values encoded so they cannot forge another key.
 */
import { busyBody } from '../fixtures/expected-bodies.js';
import { send } from '../fixtures/http-app.js';
import type { HttpLockSuite } from '../fixtures/http-lock-suite.js';

export function describeKeysFromArguments(h: HttpLockSuite): void {
  describe('keys built from what the handler receives', () => {
    it('locks order:<0.userId> from @Body()', async () => {
      const release = h.probe.hold('order:u1');
      const first = send(h, '/keys/orders', { body: { userId: 'u1' } });
      await h.probe.entered('order:u1');

      const busy = await send(h, '/keys/orders', { body: { userId: 'u1' } });
      expect(busy.status).toBe(409);
      expect(busy.body).toEqual(busyBody('order:u1'));
      const other = await send(h, '/keys/orders', { body: { userId: 42 } });
      expect(other.status).toBe(201);
      expect(other.body).toEqual({ keys: ['order:42'] });

      release();
      expect((await first).body).toEqual({ keys: ['order:u1'] });
    });

    it("locks user:<0> from @Headers('userid')", async () => {
      const release = h.probe.hold('user:alice');
      const first = send(h, '/keys/profile', {
        headers: { userid: 'alice' },
      });
      await h.probe.entered('user:alice');

      const busy = await send(h, '/keys/profile', {
        headers: { userid: 'alice' },
      });
      expect(busy.status).toBe(409);
      expect(busy.body).toEqual(busyBody('user:alice'));
      const other = await send(h, '/keys/profile', {
        headers: { userid: 'bob' },
      });
      expect(other.body).toEqual({ keys: ['user:bob'] });

      release();
      expect((await first).body).toEqual({ keys: ['user:alice'] });
    });

    it('fills several placeholders: seat:<0>:<1>', async () => {
      const release = h.probe.hold('seat:gala:12');
      const first = send(h, '/keys/seats/gala/12');
      await h.probe.entered('seat:gala:12');

      // ParseIntPipe ran first: "012" is the same seat as "12".
      const busy = await send(h, '/keys/seats/gala/012');
      expect(busy.status).toBe(409);
      expect(busy.body).toEqual(busyBody('seat:gala:12'));
      const neighbour = await send(h, '/keys/seats/gala/13');
      expect(neighbour.status).toBe(201);
      expect(neighbour.body).toEqual({ keys: ['seat:gala:13'] });

      release();
      expect((await first).body).toEqual({ keys: ['seat:gala:12'] });
    });

    it('holds every key of an array of templates inside the handler', async () => {
      const release = h.probe.hold('transfer:a:b');
      const first = send(h, '/keys/transfer/a/b');
      await h.probe.entered('transfer:a:b');
      expect(await h.locks.isLocked('account:a')).toBe(true);
      expect(await h.locks.isLocked('account:b')).toBe(true);

      // b -> c needs account:b: refused, and account:c is not left behind.
      const busy = await send(h, '/keys/transfer/b/c');
      expect(busy.status).toBe(409);
      expect(busy.body).toEqual(busyBody('account:b'));
      expect(await h.locks.isLocked('account:c')).toBe(false);

      release();
      const response = await first;
      expect(response.status).toBe(201);
      expect(response.body).toEqual({
        keys: ['account:a', 'account:b'],
        locked: { a: true, b: true },
      });
      expect(await h.locks.isLocked('account:a')).toBe(false);
      expect(await h.locks.isLocked('account:b')).toBe(false);
    });

    it('uses the keys a key function returns', async () => {
      const release = h.probe.hold('cart:2');
      const first = send(h, '/keys/cart', {
        body: { items: [{ sku: 'B2' }, { sku: 'A1' }] },
      });
      await h.probe.entered('cart:2');

      const busy = await send(h, '/keys/cart', {
        body: { items: [{ sku: 'B2' }] },
      });
      expect(busy.status).toBe(409);
      expect(busy.body).toEqual(busyBody('sku:B2'));
      const other = await send(h, '/keys/cart', {
        body: { items: [{ sku: 'C3' }] },
      });
      expect(other.body).toEqual({ keys: ['sku:C3'] });

      release();
      // Held in canonical (sorted) order.
      expect((await first).body).toEqual({ keys: ['sku:A1', 'sku:B2'] });
    });
  });
}

export function describeEncodedUserValues(h: HttpLockSuite): void {
  describe('user values are encoded', () => {
    it("locks 1:admin as coupon:1%3Aadmin, apart from 'coupon:<0>:admin' with 1", async () => {
      const releaseCode = h.probe.hold('code:1:admin');
      const releaseAdmin = h.probe.hold('admin:1');
      const byCode = send(h, `/coupons/code/${encodeURIComponent('1:admin')}`);
      const admin = send(h, '/coupons/admin/1');
      // Both hold their lock at the same time: the keys do not collide.
      await h.probe.entered('code:1:admin');
      await h.probe.entered('admin:1');
      expect(await h.redis.exists('lock:{coupon:1%3Aadmin}')).toBe(1);
      expect(await h.redis.exists('lock:{coupon:1:admin}')).toBe(1);

      releaseCode();
      releaseAdmin();
      const [codeResponse, adminResponse] = await Promise.all([byCode, admin]);
      expect(codeResponse.status).toBe(201);
      expect(codeResponse.body).toEqual({
        code: '1:admin',
        keys: ['coupon:1%3Aadmin'],
      });
      expect(adminResponse.status).toBe(201);
      expect(adminResponse.body).toEqual({
        id: '1',
        keys: ['coupon:1:admin'],
      });
    });

    it('keeps braces of a user value out of the Redis hash tag', async () => {
      const response = await send(
        h,
        `/coupons/code/${encodeURIComponent('{7}')}`,
      );
      expect(response.status).toBe(201);
      expect(response.body).toEqual({
        code: '{7}',
        keys: ['coupon:%7B7%7D'],
      });
    });
  });
}
