import { CallDeadlines } from './call-deadlines.js';

describe('CallDeadlines', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('expires each unanswered call at its own deadline, oldest first', () => {
    const deadlines = new CallDeadlines(100);
    const expired: string[] = [];
    const first = deadlines.start(() => expired.push('first'));
    vi.advanceTimersByTime(40);
    deadlines.start(() => expired.push('second'));
    vi.advanceTimersByTime(59);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['first']);
    expect(deadlines.settle(first)).toBe(false);
    vi.advanceTimersByTime(39);
    expect(expired).toEqual(['first']);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual(['first', 'second']);
  });

  it('never expires a call that answered in time, even behind an older one still running', () => {
    const deadlines = new CallDeadlines(100);
    const expired: string[] = [];
    deadlines.start(() => expired.push('slow'));
    vi.advanceTimersByTime(10);
    const quick = deadlines.start(() => expired.push('quick'));
    expect(deadlines.settle(quick)).toBe(true);
    expect(deadlines.settle(quick)).toBe(false);
    vi.advanceTimersByTime(500);
    expect(expired).toEqual(['slow']);
  });

  it('keeps every clock through many calls answered out of order', () => {
    const deadlines = new CallDeadlines(100);
    let expired = 0;
    const calls = Array.from({ length: 5000 }, () =>
      deadlines.start(() => (expired += 1)),
    );
    // Answer all but every 7th, newest first, which defeats the in-order fast path.
    for (let i = calls.length - 1; i >= 0; i--) {
      if (i % 7 !== 0) expect(deadlines.settle(calls[i])).toBe(true);
    }
    vi.advanceTimersByTime(100);
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
