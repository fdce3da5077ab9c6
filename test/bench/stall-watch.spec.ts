/** The probes' stall watch sees this process's own event loop held up. */
import { setTimeout as sleep } from 'node:timers/promises';
import { watchStalls } from '../../bench/scenarios/stall-watch.js';

function blockFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: nothing else runs meanwhile
  }
}

describe('watchStalls', () => {
  it('reports a blocked event loop as a delay at least as long as the block', async () => {
    const stop = watchStalls();
    await sleep(20);
    blockFor(60);
    await sleep(20);
    const stalls = stop();
    expect(stalls.loopDelayMaxMs).toBeGreaterThanOrEqual(55);
    expect(stalls.gcMs).toBeGreaterThanOrEqual(stalls.gcLongestMs);
  });
});
