/**
 * What Redis is sent per acquisition when 16 callers of one process take
 * turns on one key with a 0 ms hold (C's one-process shape): acquisitions
 * per second, and each command's calls per 1,000 acquisitions (`INFO
 * commandstats`, which counts the commands inside scripts too), for each
 * contender named, one after another in this process. A probe for where
 * the hand-offs go, not a benchmark: `npm run bench -- --only C` measures.
 *
 *   node --import @swc-node/register/esm-register bench/probes/one-key-commands.ts \
 *     raw-fifo ours-service
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379), used by nothing else
 * meanwhile; it resets the server's command statistics and writes keys
 * `probe:one-key:*`.
 */
import { Redis } from 'ioredis';
import { openContender } from '../contenders/index.js';
import { probeArguments } from './cycles.js';

const { url, ids } = probeArguments('one-key-commands.ts');
const callers = 16;
const windowMs = 3_000;
const admin = new Redis(url);

/** Calls per command since the last reset, from `INFO commandstats`. */
async function commandCalls(): Promise<Map<string, number>> {
  const stats = await admin.info('commandstats');
  const calls = new Map<string, number>();
  for (const [, name, count] of stats.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm))
    calls.set(name, Number(count));
  return calls;
}

for (const id of ids) {
  const lock = await openContender(id, { urls: [url] });
  const key = `probe:one-key:${id}`;
  let acquisitions = 0;
  let counting = false;
  const run = async (ms: number) => {
    const end = performance.now() + ms;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < end) {
          const held = await lock.acquire(key, { ttlMs: 10_000 });
          if (counting) acquisitions += 1;
          await held.release();
        }
      }),
    );
  };
  await run(500);
  await admin.config('RESETSTAT');
  counting = true;
  await run(windowMs);
  const calls = await commandCalls();
  await lock.close();
  const perThousand = [...calls]
    .filter(([name]) => name !== 'config' && name !== 'info')
    .toSorted((a, b) => b[1] - a[1])
    .map(
      ([name, count]) =>
        `${name} ${((count * 1000) / acquisitions).toFixed(0)}`,
    );
  console.log(
    `${id.padEnd(16)} ${Math.round(acquisitions / (windowMs / 1000))} acquisitions/s; per 1,000: ${perThousand.join(', ')}`,
  );
}
admin.disconnect();
