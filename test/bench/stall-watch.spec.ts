/** The probes' stall watch sees this process's own event loop held up. */
import { setTimeout as sleep } from 'node:timers/promises';
import { collectGarbage } from '../../bench/gc.js';
import { watchStalls } from '../../bench/scenarios/stall-watch.js';
import { blockEventLoopUntil } from '../support/lock-fixtures.js';

describe('watchStalls', () => {
  it('reports a blocked event loop as a delay at least as long as the block', async () => {
    const stop = watchStalls();
    await sleep(20);
    blockEventLoopUntil(60, () => true, 60);
    await sleep(20);
    const stalls = stop();
    expect(stalls.loopDelayMaxMs).toBeGreaterThanOrEqual(55);
    expect(stalls.gcMs).toBeGreaterThanOrEqual(stalls.gcLongestMs);
  });

  it('counts a full collection as a major one', async () => {
    const stop = watchStalls();
    expect(collectGarbage()).toBe(true);
    // GC entries reach the observer after the collection, not during it.
    await sleep(20);
    const stalls = stop();
    expect(stalls.majorGcs).toBeGreaterThanOrEqual(1);
  });
});
