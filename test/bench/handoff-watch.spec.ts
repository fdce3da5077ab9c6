/** The probes' hand-off watch times a hand-off between two processes' backends. */
import { nowMs } from '../../bench/clock.js';
import { watchHandoffs } from '../../bench/scenarios/handoff-watch.js';
import { openLocks, type OpenedLocks } from '../support/lock-clients.js';
import { eventually } from '../support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../support/redis-server.js';

let server: RedisServerHandle;
const opened: OpenedLocks[] = [];

beforeAll(async () => {
  server = await startRedisServer();
});

afterAll(async () => {
  await Promise.all(opened.splice(0).map((locks) => locks.close()));
  await server.stop();
});

describe('watchHandoffs', () => {
  it('records when Redis granted a lock to a waiter here and when its wake-up was read, until stopped', async () => {
    // Two backends, each with its own wake list, as two processes have.
    const holderSide = openLocks(server.url);
    const waiterSide = openLocks(server.url);
    opened.push(holderSide, waiterSide);
    const stop = await watchHandoffs(server.url);
    const holder = await holderSide.locks.acquire('watched');
    const waiting = waiterSide.locks.acquire('watched', { waitTime: 5_000 });
    await eventually(
      async () => (await waiterSide.client.llen('lock:{watched}:queue')) === 1,
    );
    const releasedAt = nowMs();
    await holder.release();
    const next = await waiting;
    const acquiredAt = nowMs();
    const wakes = stop();

    expect(wakes).toHaveLength(2);
    const [grantedAt, readAt] = wakes;
    // On the shared clock, to within the Redis clock's offset (half a
    // loopback round trip).
    expect(grantedAt).toBeGreaterThan(releasedAt - 1);
    expect(readAt).toBeGreaterThanOrEqual(grantedAt - 1);
    expect(readAt).toBeLessThanOrEqual(acquiredAt);

    // Stopped: a second hand-off is not recorded.
    const again = waiterSide.locks.acquire('watched', { waitTime: 5_000 });
    const third = holderSide.locks.acquire('watched', { waitTime: 5_000 });
    await next.release();
    await (await again).release();
    await (await third).release();
    expect(wakes).toHaveLength(2);
  });
});
