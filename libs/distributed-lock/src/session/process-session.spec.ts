import type { SessionStore } from '../backends/lock-backend.js';
import { ProcessSession, type SessionBound } from './process-session.js';

/** A store whose answers the test controls: renewals hang unless told otherwise. */
function storeThat(renew: SessionStore['renew']): SessionStore & {
  ended: string[];
  reconnect: () => void;
} {
  const ended: string[] = [];
  const listeners: (() => void)[] = [];
  return {
    holdLeaseMs: 60_000,
    ended,
    open: () => Promise.resolve(),
    renew,
    end: (id) => {
      ended.push(id);
      return Promise.resolve();
    },
    onReconnect: (listener) => {
      listeners.push(listener);
      return () => undefined;
    },
    reconnect: () => {
      for (const listener of listeners) listener();
    },
  };
}

const hangs = () => new Promise<boolean>(() => undefined);

function recordingHold(): SessionBound & { lapsedAt?: number } {
  const hold: SessionBound & { lapsedAt?: number } = {
    sessionLapsed: () => {
      hold.lapsedAt = performance.now();
    },
  };
  return hold;
}

describe('ProcessSession', () => {
  it('tells every bound hold at its deadline when renewals never answer, even if the timer fires early', async () => {
    // Node timers often fire a fraction of a millisecond before their time by
    // performance.now(): the deadline timer must lapse the session anyway.
    const sessions = Array.from(
      { length: 20 },
      () => new ProcessSession(storeThat(hangs), 300),
    );
    const holds = await Promise.all(
      sessions.map(async (session) => {
        const hold = recordingHold();
        expect(session.bind(hold, await session.ready())).toBe(true);
        return hold;
      }),
    );
    const openedAt = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 450));
    for (const hold of holds) {
      expect(hold.lapsedAt).toBeDefined();
      // The deadline is the TTL less the drift allowance (1% + 2 ms).
      expect(hold.lapsedAt! - openedAt).toBeLessThan(300);
    }
    for (const session of sessions) expect(session.liveId).toBeUndefined();
  });

  it('lapses at once when a renewal finds the session gone, and ends it in the store', async () => {
    const store = storeThat(() => Promise.resolve(false));
    const session = new ProcessSession(store, 300);
    const id = await session.ready();
    const hold = recordingHold();
    session.bind(hold, id);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(hold.lapsedAt).toBeDefined();
    expect(store.ended).toEqual([id]);
    // The next hold opens a new session.
    expect(await session.ready()).not.toBe(id);
    await session.close(true);
  });

  it('keeps the session while renewals answer, and renews at once after a reconnect', async () => {
    let renewals = 0;
    const store = storeThat(() => {
      renewals += 1;
      return Promise.resolve(true);
    });
    const session = new ProcessSession(store, 300);
    const id = await session.ready();
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(session.liveId).toBe(id);
    const before = renewals;
    expect(before).toBeGreaterThanOrEqual(5);
    store.reconnect();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(renewals).toBe(before + 1);
    await session.close(false);
    expect(store.ended).toEqual([]);
  });

  it('refuses to bind a hold to a session that is not the live one', async () => {
    const session = new ProcessSession(storeThat(hangs), 300);
    const id = await session.ready();
    expect(session.bind(recordingHold(), `${id}x`)).toBe(false);
    await session.close(true);
    expect(session.bind(recordingHold(), id)).toBe(false);
  });
});
