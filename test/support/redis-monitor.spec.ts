import { Redis } from 'ioredis';
import { openMonitor } from './redis-monitor.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';

let server: RedisServerHandle;

beforeAll(async () => {
  server = await startRedisServer();
});

afterAll(async () => {
  await server.stop();
});

// ioredis's own monitor() failed 40 times out of 40 under this load: the
// other client's commands reach the new connection in the same packet as
// MONITOR's "OK".
it('starts while another client keeps Redis busy, and sees the commands sent after it', async () => {
  const busy = new Redis(server.url);
  const admin = new Redis(server.url);
  const done = new AbortController();
  const load = (async () => {
    while (!done.signal.aborted)
      await Promise.all(Array.from({ length: 50 }, () => busy.ping()));
  })();
  try {
    for (let i = 0; i < 10; i += 1) {
      const monitor = await openMonitor(admin);
      const seen: string[] = [];
      monitor.on('monitor', (_time: string, args: string[]) =>
        seen.push(args.join(' ')),
      );
      await admin.echo(`marker-${i}`);
      await expect.poll(() => seen.includes(`echo marker-${i}`)).toBe(true);
      monitor.disconnect();
    }
  } finally {
    done.abort();
    await load;
    busy.disconnect();
    admin.disconnect();
  }
});
