/**
 * Redis's own time per call (`INFO commandstats`, usec_per_call) of the
 * fenced acquisition's script against what the unfenced one sends (a bare
 * `SET NX PX`), with two stripped scripts between them to show where the
 * time goes: an empty script, and one that runs only the `SET NX PX`.
 * 30,000 sequential calls each, over 1,000 rotating keys with a 1 ms lease
 * (so nearly every call finds its key free, as in bench A).
 *
 *   node --import @swc-node/register/esm-register bench/probes/script-cost.ts
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); it resets the
 * server's command statistics and writes keys `probe:script:*`.
 */
import { Redis } from 'ioredis';
import { readScriptWithIncludes } from '../../libs/distributed-lock/src/backends/lua-scripts.js';

const lockScriptsUrl = new URL(
  '../../libs/distributed-lock/src/backends/redis/lock-scripts.ts',
  import.meta.url,
).href;
const variants: Record<string, string | undefined> = {
  'bare SET NX PX (the unfenced acquisition)': undefined,
  'empty script (return 1)': 'return 1',
  'script with SET NX PX only': `if not redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2], 'nx') then
  return 0
end
return 1`,
  'acquire-fenced.lua (the fenced acquisition)': readScriptWithIncludes(
    lockScriptsUrl,
    'acquire-fenced',
  ),
};

const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const calls = 30_000;

/** usec_per_call of `command` in INFO commandstats. */
async function usecPerCall(command: string): Promise<number> {
  const stats = await client.info('commandstats');
  const line = new RegExp(`cmdstat_${command}:.*usec_per_call=([0-9.]+)`);
  return Number(line.exec(stats)?.[1]);
}

for (const [name, lua] of Object.entries(variants)) {
  const sha = lua === undefined ? '' : await client.script('LOAD', lua);
  await client.config('RESETSTAT');
  for (let i = 0; i < calls; i++) {
    const n = i % 1000;
    await (lua === undefined
      ? client.set(`probe:script:{${n}}`, 'token', 'PX', 1, 'NX')
      : client.evalsha(
          sha as string,
          3,
          `probe:script:{${n}}`,
          `probe:script:{${n}}:fence`,
          `probe:script:{${n}}:q`,
          'token',
          1,
        ));
  }
  const us = await usecPerCall(lua === undefined ? 'set' : 'evalsha');
  process.stdout.write(`${name.padEnd(46)} ${us.toFixed(2)} µs\n`);
}
client.disconnect();
