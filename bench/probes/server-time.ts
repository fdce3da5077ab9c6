/**
 * The Redis server's CPU time per lock cycle (`INFO cpu`, user + system:
 * commands, scripts and the network work around them) of each contender
 * named, with B's shape: 64 loops, each on its own keys, 1,000 acquire +
 * release cycles per loop. Each contender opens in this process and runs
 * alone, one after another.
 *
 *   node --import @swc-node/register/esm-register bench/probes/server-time.ts \
 *     raw ours-service ours-service-fenced
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379), used by nothing
 * else meanwhile; it writes keys `probe:server:*` and flushes the database
 * after each contender.
 */
import { Redis } from 'ioredis';
import { openContender } from '../contenders/index.js';
import { probeArguments } from './cycles.js';
import { serverCpuSeconds } from './server-cpu.js';

const { url, ids } = probeArguments('server-time.ts');
const loops = 64;
const cyclesPerLoop = 1_000;
const admin = new Redis(url);

for (const id of ids) {
  const lock = await openContender(id, { urls: [url] });
  const before = await serverCpuSeconds(admin);
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      for (let i = 0; i < cyclesPerLoop; i++) {
        const held = await lock.acquire(`probe:server:${loop}:${i % 50}`, {
          ttlMs: 10_000,
        });
        await held.release();
      }
    }),
  );
  const used = (await serverCpuSeconds(admin)) - before;
  await lock.close();
  console.log(
    `${id.padEnd(28)} ${((used * 1e6) / (loops * cyclesPerLoop)).toFixed(2)} µs of Redis CPU per cycle`,
  );
  await admin.flushall();
}
admin.disconnect();
