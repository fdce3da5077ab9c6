import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CallDeadlines } from './call-deadlines.js';

/**
 * Moves the fake clock on by `ms`, then lets a sweep that fell due run: it
 * waits for the (real) check phase after its timer, as a sweep that fires
 * after a stall must see the answers read meanwhile.
 */
async function advance(ms: number): Promise<void> {
  vi.advanceTimersByTime(ms);
  await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('CallDeadlines', () => {
  beforeEach(() =>
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }),
  );
  afterEach(() => vi.useRealTimers());

  it('expires each unanswered call at its own deadline, oldest first', async () => {
    const deadlines = new CallDeadlines(100);
    const expired: string[] = [];
    const first = deadlines.start(() => expired.push('first'));
    await advance(40);
    deadlines.start(() => expired.push('second'));
    await advance(59);
    expect(expired).toEqual([]);
    await advance(1);
    expect(expired).toEqual(['first']);
    expect(deadlines.settle(first)).toBe(false);
    await advance(39);
    expect(expired).toEqual(['first']);
    await advance(1);
    expect(expired).toEqual(['first', 'second']);
  });

  it('never expires a call that answered in time, even behind an older one still running', async () => {
    const deadlines = new CallDeadlines(100);
    const expired: string[] = [];
    deadlines.start(() => expired.push('slow'));
    await advance(10);
    const quick = deadlines.start(() => expired.push('quick'));
    expect(deadlines.settle(quick)).toBe(true);
    expect(deadlines.settle(quick)).toBe(false);
    await advance(500);
    expect(expired).toEqual(['slow']);
  });

  it('keeps every clock through many calls answered out of order', async () => {
    const deadlines = new CallDeadlines(100);
    let expired = 0;
    const calls = Array.from({ length: 5000 }, () =>
      deadlines.start(() => (expired += 1)),
    );
    // Answer all but every 7th, newest first, which defeats the in-order fast path.
    for (let i = calls.length - 1; i >= 0; i--) {
      if (i % 7 !== 0) expect(deadlines.settle(calls[i])).toBe(true);
    }
    await advance(100);
    expect(expired).toBe(Math.ceil(5000 / 7));
  });

  it('holds one unreferenced timer, and none once idle after stopWhenIdle()', () => {
    const deadlines = new CallDeadlines(100);
    const calls = [deadlines.start(() => {}), deadlines.start(() => {})];
    expect(vi.getTimerCount()).toBe(1);
    deadlines.stopWhenIdle();
    expect(vi.getTimerCount()).toBe(1);
    for (const call of calls) deadlines.settle(call);
    deadlines.stopWhenIdle();
    expect(vi.getTimerCount()).toBe(0);
  });
});

/** A call whose expiry handler is the only holder of `payload`, answered at once. */
function answeredCall(deadlines: CallDeadlines): WeakRef<object> {
  const payload = { reply: 'x'.repeat(1_000) };
  deadlines.settle(deadlines.start(() => void payload));
  return new WeakRef(payload);
}

describe('CallDeadlines memory', () => {
  // V8's gc(), reached without starting Node with --expose-gc.
  setFlagsFromString('--expose-gc');
  const collectGarbage = runInNewContext('gc') as () => void;

  it('keeps nothing of an answered call, even while an older call still runs', async () => {
    const deadlines = new CallDeadlines(60_000);
    const older = deadlines.start(() => undefined);
    const answeredFirst = answeredCall(deadlines);
    const answeredAfter = answeredCall(deadlines);
    // A WeakRef holds its target until the current job ends.
    await new Promise<void>((resolve) => setImmediate(resolve));
    collectGarbage();

    expect(answeredFirst.deref()).toBeUndefined();
    expect(answeredAfter.deref()).toBeUndefined();
    deadlines.settle(older);
    deadlines.stopWhenIdle();
  });
});
