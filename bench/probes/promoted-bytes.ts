/**
 * What of a lock cycle outlives V8's young-generation GC, per contender, with
 * B's load: 64 concurrent loops, each acquiring and releasing its own key.
 * After a 1.5 s warm-up, V8's sampling heap profiler runs for 3 s keeping
 * only the samples that a young GC did not collect (moved to the old
 * generation, or allocated there); prints those bytes per cycle and the call
 * stacks (innermost last) that allocated most of them. A cycle's objects die
 * within a millisecond or so, so nearly nothing should outlive a young GC:
 * what does is copied to the old generation and kept until the next full GC,
 * and under this load every young GC then pauses longer.
 *
 * Run its compiled copy, which `npm run bench` (or `bench:smoke`) writes:
 *
 *   node $(ls -td .bench-output/workers/* | head -1)/bench/probes/promoted-bytes.js ours-service-fenced
 *
 * Through the TypeScript loader (`node --import
 * @swc-node/register/esm-register bench/probes/promoted-bytes.ts`) it
 * measures the loader too: `LockService` showed 830-930 bytes per cycle in
 * three runs of three, against 20-100 compiled.
 *
 * Redis at REDIS_URL (default redis://127.0.0.1:6379); keys `probe:promoted:*`.
 */
import { Session } from 'node:inspector/promises';
import { openContender } from '../contenders/index.js';
import { concurrentLoops, probeArguments } from './cycles.js';

const loops = 64;
const { url, ids } = probeArguments('promoted-bytes.ts');
const id = ids[0]!;
const lock = await openContender(id, { urls: [url] });

interface ProfileNode {
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

const run = { on: true };
const tally = { cycles: 0 };
const work = concurrentLoops(
  lock,
  `probe:promoted:${id}`,
  loops,
  () => run.on,
  tally,
);

await new Promise((resolve) => setTimeout(resolve, 1_500));
const session = new Session();
session.connect();
await session.post('HeapProfiler.startSampling', {
  samplingInterval: 4_096,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: false,
});
const counted = tally.cycles;
await new Promise((resolve) => setTimeout(resolve, 3_000));
const { profile } = (await session.post('HeapProfiler.stopSampling')) as {
  profile: { head: ProfileNode };
};
const measured = tally.cycles - counted;
run.on = false;
await work;
session.disconnect();
await lock.close();

/** Bytes by the innermost four frames of the stack that allocated them. */
const bySite = new Map<string, number>();
function collect(node: ProfileNode, stack: readonly string[]): void {
  const { functionName, url: file, lineNumber } = node.callFrame;
  const frame = `${functionName || '(anonymous)'} ${file.split('/').slice(-2).join('/')}:${lineNumber + 1}`;
  const here = [...stack, frame];
  if (node.selfSize > 0) {
    const site = here.slice(-4).join(' < ');
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
  }
  for (const child of node.children) collect(child, here);
}
collect(profile.head, []);

const total = [...bySite.values()].reduce((sum, bytes) => sum + bytes, 0);
process.stdout.write(
  `${id.padEnd(24)} ${(measured / 3).toFixed(0).padStart(6)} cycles/s  ${(total / measured).toFixed(0).padStart(5)} bytes per cycle outlived a young GC\n`,
);
for (const [site, bytes] of [...bySite]
  .toSorted((a, b) => b[1] - a[1])
  .slice(0, 8))
  process.stdout.write(
    `  ${(bytes / measured).toFixed(0).padStart(5)} B/cycle  ${site}\n`,
  );
