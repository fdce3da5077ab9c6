import { Redis } from 'ioredis';
import { WakeListener } from '@app/distributed-lock/backends/redis/wake-listener.js';
import { nowMs } from '../clock.js';

/**
 * The wake-ups one process read during a window, each as two stamps on the
 * shared clock (see nowMs): when Redis granted the lock and when this
 * process read the wake-up. Flat pairs: granted, delivered.
 */
export type Wakes = number[];

/**
 * Starts recording every wake-up this process's lock backends read (a lock
 * handed to a waiter here by another process's release). The grant's time
 * is the fencing token the wake-up carries: the Redis clock in µs when the
 * token was issued, which it is unless tokens came faster than one a µs.
 * The Redis clock is put on the shared clock by the quickest of a few
 * `TIME` round trips to `url`.
 *
 * For probes only: it wraps a private method of the library's wake
 * listener, so it sees every backend of the process. The returned function
 * stops and answers what it saw.
 */
export async function watchHandoffs(url: string): Promise<() => Wakes> {
  const offsetMs = await redisClockOffset(url);
  const listener = WakeListener.prototype as unknown as {
    deliver(message: string): void;
  };
  const deliver = listener.deliver;
  const wakes: Wakes = [];
  listener.deliver = function (this: unknown, message: string) {
    const deliveredAt = nowMs();
    const fencingToken = Number(message.split('|')[1]);
    wakes.push(fencingToken / 1_000 - offsetMs, deliveredAt);
    deliver.call(this, message);
  };
  return () => {
    listener.deliver = deliver;
    return wakes;
  };
}

/** Redis's clock (ms since the epoch) minus the shared clock, to within half the quickest round trip. */
async function redisClockOffset(url: string): Promise<number> {
  const client = new Redis(url, { lazyConnect: true });
  try {
    await client.connect();
    let best = { roundTrip: Infinity, offset: 0 };
    for (let i = 0; i < 20; i++) {
      const sentAt = nowMs();
      const [seconds, micros] = await client.time();
      const answeredAt = nowMs();
      const roundTrip = answeredAt - sentAt;
      if (roundTrip < best.roundTrip) {
        const redisMs = Number(seconds) * 1_000 + Number(micros) / 1_000;
        best = { roundTrip, offset: redisMs - (sentAt + answeredAt) / 2 };
      }
    }
    return best.offset;
  } finally {
    client.disconnect();
  }
}
