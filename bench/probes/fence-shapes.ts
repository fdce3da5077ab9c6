/**
 * Ways to take a lock with its fencing token, in B's shape (64 loops of
 * acquire + release on their own keys, one auto-pipelined client, nothing of
 * the library's own), against the unfenced `SET NX PX`: cycles/s and the
 * Redis server's CPU per cycle (`INFO cpu`). Every shape releases with
 * release-unqueued.lua.
 *
 * - `set`: the unfenced acquisition, a bare `SET NX PX`;
 * - `script`: acquire-fenced.lua, the fenced acquisition (three calls in
 *   one script: the lock's `SET`, `TIME`, the counter's `SET ... GET`);
 * - `multi`: no script. A stream's next ID is at least the server clock in
 *   ms and above its last ID, what the token needs, in one command; sent in
 *   a `MULTI` with the lock's `SET NX PX` and the stream's `PEXPIRE`, so the
 *   token is issued in the same atomic step as the grant.
 *
 *   node --import @swc-node/register/esm-register bench/probes/fence-shapes.ts [reps]
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379), used by nothing else
 * meanwhile; it writes keys `probe:shape:*` and flushes the database after
 * each shape.
 */
import { Redis } from 'ioredis';
import { lockScriptTexts } from '../../libs/distributed-lock/src/backends/redis/lock-scripts.js';
import { serverCpuSeconds } from './server-cpu.js';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const reps = Number(process.argv[2] ?? 3);
const loops = 64;
const cyclesPerLoop = 1_000;
const admin = new Redis(url);
const client = new Redis(url, { enableAutoPipelining: true });
const fencedSha = String(
  await admin.script('LOAD', lockScriptTexts.lockAcquireFenced),
);
const releaseSha = String(
  await admin.script('LOAD', lockScriptTexts.lockReleaseUnqueued),
);

const shapes: Record<string, (key: string, token: string) => Promise<unknown>> =
  {
    set: (key, token) => client.set(key, token, 'PX', 10_000, 'NX'),
    script: (key, token) =>
      client.evalsha(fencedSha, 2, key, `${key}:fence`, token, 10_000),
    multi: (key, token) =>
      client
        .multi()
        .set(key, token, 'PX', 10_000, 'NX')
        .xadd(`${key}:fence`, 'MAXLEN', '0', '*', 'f', '')
        .pexpire(`${key}:fence`, 86_400_000)
        .exec(),
  };

for (let rep = 0; rep < reps; rep++) {
  for (const [name, acquire] of Object.entries(shapes)) {
    const cpuBefore = await serverCpuSeconds(admin);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: loops }, async (_, loop) => {
        for (let i = 0; i < cyclesPerLoop; i++) {
          const key = `probe:shape:{${loop}:${i % 50}}`;
          const token = `${loop}.${i}`;
          await acquire(key, token);
          await client.evalsha(releaseSha, 2, key, `${key}:queue`, token);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1_000;
    const cpu = (await serverCpuSeconds(admin)) - cpuBefore;
    const cycles = loops * cyclesPerLoop;
    console.log(
      `${name.padEnd(7)} ${(cycles / seconds).toFixed(0).padStart(6)} cycles/s ` +
        `${((cpu * 1e6) / cycles).toFixed(2).padStart(6)} µs of Redis CPU per cycle`,
    );
    await admin.flushall();
  }
}
admin.disconnect();
client.disconnect();
