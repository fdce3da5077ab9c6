/**
 * The readiness check: `GET /health/ready` is terminus's check of the lock
 * store (LockHealthIndicator) and the database; `GET /health` reports the
 * same check in the app's own short shape.
 */
import {
  createCoupon,
  useSaleApp,
  findTestPostgres,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('GET /health/ready', () => {
  const shop = useSaleApp(postgres!, { backendTimeout: 500 });
  afterAll(async () => {
    await shop.sale.redisServer.thaw();
  });

  it('answers 200 with the lock store, its session and the database in the details', async () => {
    await createCoupon(shop.app.http, { stock: 1 });
    const response = await shop.app.http.get('/health/ready').expect(200);
    expect(response.headers['cache-control']).toMatch(/no-cache/);
    expect(response.body).toMatchObject({
      status: 'ok',
      error: {},
      details: {
        lock: {
          status: 'up',
          store: 'redis',
          reachable: true,
          latencyMs: expect.any(Number),
          scriptsLoaded: true,
          session: { state: 'open', alive: true, id: expect.any(String) },
          nodes: [
            { address: `127.0.0.1:${shop.sale.redisServer.port}`, up: true },
          ],
        },
        database: { status: 'up' },
      },
    });
    const { lockSession } = (await shop.app.http.get('/health').expect(200))
      .body as { lockSession: string };
    expect(response.body.details.lock.session.id).toBe(lockSession);
  });

  it('answers 503 within the backend timeout while Redis is frozen, and so does /health', async () => {
    await shop.sale.redisServer.freeze();
    const startedAt = Date.now();
    const ready = await shop.app.http.get('/health/ready').expect(503);
    expect(Date.now() - startedAt).toBeLessThan(1_500);
    expect(ready.body).toMatchObject({
      status: 'error',
      error: {
        lock: {
          status: 'down',
          reachable: false,
          message: 'no answer within 500 ms',
        },
      },
      info: { database: { status: 'up' } },
    });
    const short = await shop.app.http.get('/health').expect(503);
    expect(short.body).toMatchObject({
      ok: false,
      redis: 'down',
      database: 'up',
    });

    await shop.sale.redisServer.thaw();
    await vi.waitFor(
      async () => {
        await shop.app.http.get('/health/ready').expect(200);
      },
      { timeout: 5_000, interval: 100 },
    );
  });
});
