/**
 * What the decorator's lock scope costs per call on this Node: times
 * `AsyncLocalStorage.run` (up to the callback: enabling the storage's async
 * hooks) and `disable` inside the benchmark's decorated cycle, 20,000
 * sequential cycles after 5,000 of warm-up.
 *
 *   node --import @swc-node/register/esm-register bench/probes/scope-cost.ts
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); keys `probe:scope:*`.
 */
import { lockScope } from '../../libs/distributed-lock/src/lock-service/lock-scope.js';
import { openContender } from '../contenders/index.js';
import { rotatingKeys, sequentialCycles } from './cycles.js';

type Run = typeof lockScope.run;
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const lock = await openContender('ours-decorator', { urls: [url] });
const nextKey = rotatingKeys('probe:scope');

const timed = { enableMs: 0, runs: 0, disableMs: 0, disables: 0 };
const run = lockScope.run.bind(lockScope) as Run;
const disable = lockScope.disable.bind(lockScope);
type Store = Parameters<Run>[0];
lockScope.run = ((
  store: Store,
  callback: (...args: unknown[]) => unknown,
  ...args: unknown[]
) => {
  const start = performance.now();
  return run(
    store,
    (...inner: unknown[]) => {
      timed.enableMs += performance.now() - start;
      timed.runs += 1;
      return callback(...inner);
    },
    ...args,
  );
}) as Run;
lockScope.disable = () => {
  const start = performance.now();
  disable();
  timed.disableMs += performance.now() - start;
  timed.disables += 1;
};

await sequentialCycles(lock, nextKey, 5000);
Object.assign(timed, { enableMs: 0, runs: 0, disableMs: 0, disables: 0 });
const { us: perCycle } = await sequentialCycles(lock, nextKey, 20_000);
process.stdout.write(
  `decorated cycle ${perCycle.toFixed(1)} µs; run up to its callback ${((timed.enableMs * 1000) / timed.runs).toFixed(2)} µs (${timed.runs} calls); disable ${((timed.disableMs * 1000) / timed.disables).toFixed(2)} µs (${timed.disables} calls)\n`,
);
await lock.close();
