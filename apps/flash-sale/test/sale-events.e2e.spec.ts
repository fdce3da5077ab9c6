/**
 * The sale's server-sent events (`GET /api/events`), which the page reads:
 * one shared poll, no locks taken, streams ended at shutdown.
 */
import type { AddressInfo } from 'node:net';
import { LockService } from '@app/distributed-lock';
import { SaleFeed } from '../src/web/sale-feed.service.js';
import { until } from './support/chromium.js';
import { openEvents } from './support/event-stream.js';
import {
  createCoupon,
  findTestPostgres,
  sleep,
  startApp,
} from './support/harness.js';
import { usePageApp } from './support/page-app.js';

const postgres = await findTestPostgres();

describe('GET /api/events', () => {
  const shop = usePageApp(postgres);

  it('streams snapshots over SSE from one shared poll that stops when the last client leaves', async () => {
    const feed = shop.app.app.get(SaleFeed);
    const couponId = await createCoupon(shop.app.http, { stock: 7 });
    await until('no client left from earlier tests', () => {
      return feed.clientCount === 0 && feed.pollerCount === 0;
    });
    const reads = vi.spyOn(feed, 'snapshot');
    try {
      const first = await openEvents(shop.baseUrl);
      const second = await openEvents(shop.baseUrl);
      expect(first.status).toBe(200);
      expect(first.headers['content-type']).toMatch(/^text\/event-stream/);
      await until('a snapshot on both streams', () => {
        return first.updates.length > 0 && second.updates.length > 0;
      });
      expect(feed.clientCount).toBe(2);
      expect(feed.pollerCount).toBe(1);
      const update = first.updates[0];
      expect(update.ok).toBe(true);
      if (!update.ok) return;
      expect(update.coupons.find((c) => c.id === couponId)).toEqual({
        id: couponId,
        name: 'Flash coupon',
        price: 9.99,
        stock: 7,
        remaining: 7,
        sold: 0,
        saleState: 'on_sale',
        startAt: expect.any(String),
        endAt: expect.any(String),
      });

      first.close();
      await first.ended;
      await until('the first client to be gone', () => feed.clientCount === 1);
      expect(feed.pollerCount).toBe(1);
      second.close();
      await second.ended;
      await until('the poll to stop', () => {
        return feed.clientCount === 0 && feed.pollerCount === 0;
      });
      // No timer is left behind: nothing reads the sale any more.
      const readsAtStop = reads.mock.calls.length;
      await sleep(1_600);
      expect(reads.mock.calls.length).toBe(readsAtStop);
    } finally {
      reads.mockRestore();
    }
  });

  it('never takes a lock while streaming', async () => {
    const locks = shop.app.app.get(LockService);
    const spies = [
      vi.spyOn(locks, 'acquire'),
      vi.spyOn(locks, 'tryAcquire'),
      vi.spyOn(locks, 'isLocked'),
    ];
    try {
      const stream = await openEvents(shop.baseUrl);
      await until('a snapshot', () => stream.updates.length > 0);
      await sleep(1_200);
      stream.close();
      await stream.ended;
      for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });

  it('ends open streams when the app shuts down, so that it stops promptly', async () => {
    // Another instance on the same Redis and database.
    const other = await startApp({
      redisUrl: shop.redisServer.url,
      ...shop.database,
    });
    let closed = false;
    try {
      await other.app.listen(0, '127.0.0.1');
      const { port } = other.app.getHttpServer().address() as AddressInfo;
      const stream = await openEvents(`http://127.0.0.1:${port}`);
      await until('a snapshot', () => stream.updates.length > 0);
      const started = Date.now();
      await other.close();
      closed = true;
      // Well below the 5 s keep-alive timeout an idle SSE connection would add.
      expect(Date.now() - started).toBeLessThan(3_000);
      await stream.ended;
      expect(other.app.get(SaleFeed).pollerCount).toBe(0);
    } finally {
      if (!closed) await other.close();
    }
  });
});
