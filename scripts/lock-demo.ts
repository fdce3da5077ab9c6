/**
 * `npm run demo:lock`: four separate OS processes increment one Redis counter with a
 * deliberately non-atomic read-modify-write, first without a lock, then under
 * the library's lock, and print what each run ended with.
 *
 * Uses REDIS_URL (default redis://127.0.0.1:6379); when nothing answers there
 * and `redis-server` is installed, it starts a private one on a free port.
 */
import { Redis } from 'ioredis';
import { runTs } from '../test/support/processes.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../test/support/redis-server.js';

const processes = 4;
const iterations = 50;
const worker = 'test/support/workers/counter-worker.ts';

async function reachable(url: string): Promise<boolean> {
  const probe = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    await probe.ping();
    return true;
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

let own: RedisServerHandle | undefined;
let url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
if (!(await reachable(url))) {
  own = await startRedisServer();
  console.log(
    `No Redis at ${url}; started a private redis-server at ${own.url}`,
  );
  url = own.url;
}
// The workers use database 15 of a shared server so the demo never touches real data.
const demoUrl = own ? url : `${url.replace(/\/\d*$/, '')}/15`;
const redis = new Redis(demoUrl);

try {
  for (const mode of ['nolock', 'lock'] as const) {
    await redis.del('counter', 'counter:ready');
    const started = performance.now();
    await Promise.all(
      Array.from({ length: processes }, () =>
        runTs(worker, [demoUrl, String(iterations), mode, String(processes)]),
      ),
    );
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const value = Number(await redis.get('counter'));
    const expected = processes * iterations;
    const verdict =
      value === expected ? 'exact' : `${expected - value} updates lost`;
    console.log(
      `${mode === 'lock' ? 'with the lock   ' : 'without a lock  '} ${processes} processes x ${iterations} increments: counter = ${value} of ${expected} (${verdict}), ${seconds} s`,
    );
  }
  await redis.del('counter', 'counter:ready');
} finally {
  redis.disconnect();
  await own?.stop();
}
