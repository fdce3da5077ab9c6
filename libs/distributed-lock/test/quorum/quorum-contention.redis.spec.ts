import { FencedResource } from '../../../../test/support/fenced-resource.js';
import {
  percentile,
  ready,
  seeded,
  sleep,
  useQuorumNodes,
} from './quorum-fixtures.js';

const nodes = useQuorumNodes({ five: true, look: 'five' });
const { opened } = nodes;

describe('QuorumLockBackend under contention (5 nodes)', () => {
  it('lets one holder in at a time across 4 processes (FencedResource referee)', async () => {
    const processes = [0, 1, 2, 3].map(() =>
      opened.process(nodes.five, {
        watchdogLeaseTime: 2_000,
        waitTime: 10_000,
      }),
    );
    await ready(processes.flatMap((p) => p.clients));
    const referee = new FencedResource();
    const random = seeded(42);
    const startedAt = Date.now();
    await Promise.all(
      processes.flatMap((process, p) =>
        [0, 1, 2].map(async (c) => {
          const name = `p${p}c${c}`;
          for (let i = 0; i < 12; i++) {
            await process.locks.using('hot', async (lock) => {
              referee.enter(name);
              referee.write(await lock.fence(), name);
              await sleep(Math.floor(random() * 3));
              referee.leave(name);
            });
          }
        }),
      ),
    );
    const tookMs = Date.now() - startedAt;
    console.log(
      `mutual exclusion: ${referee.accepted} critical sections by 12 callers in 4 processes in ${tookMs} ms, ${referee.overlaps} overlaps, ${referee.rejected} stale tokens`,
    );
    expect(referee.overlaps).toBe(0);
    expect(referee.rejected).toBe(0);
    expect(referee.accepted).toBe(144);
    const tokens = referee.acceptedTokens;
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  it('serves waiters in arrival order (approximate FIFO, measured)', async () => {
    const holder = opened.process(nodes.five);
    const waiters = [0, 1, 2, 3, 4, 5].map(() =>
      opened.process(nodes.five, { waitTime: 10_000 }),
    );
    await ready(waiters.flatMap((w) => w.clients));
    const held = await holder.locks.acquire('fifo', { waitTime: 0 });
    const order: number[] = [];
    const random = seeded(3);
    // Arrivals in a shuffled process order, 40 ms apart.
    const arrivals = [0, 1, 2, 3, 4, 5].toSorted(() => random() - 0.5);
    const done = arrivals.map(async (w, place) => {
      await sleep(place * 40);
      const handle = await waiters[w].locks.acquire('fifo');
      order.push(place);
      await sleep(15);
      await handle.release();
    });
    await sleep(arrivals.length * 40 + 100);
    await held.release();
    await Promise.all(done);
    console.log(`FIFO: arrival places served in the order ${order.join(', ')}`);
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('keeps the queue stalled by a waiter that died for at most waiterGraceMs', async () => {
    const graceMs = 300;
    const holder = opened.process(nodes.five, { waiterGraceMs: graceMs });
    const doomed = opened.process(nodes.five, { waiterGraceMs: graceMs });
    const live = opened.process(nodes.five, { waiterGraceMs: graceMs });
    await ready([...doomed.clients, ...live.clients]);
    const held = await holder.locks.acquire('stall', { waitTime: 0 });
    const dead = doomed.locks.acquire('stall', { waitTime: 2_000 });
    dead.catch(() => undefined);
    await sleep(50);
    const waiting = live.locks.acquire('stall', { waitTime: 5_000 });
    await sleep(50);
    // The first waiter's process dies: it can neither retry nor leave.
    for (const client of doomed.clients) client.disconnect();
    await sleep(20);
    const releasedAt = performance.now();
    await held.release();
    const handle = await waiting;
    const stalledMs = performance.now() - releasedAt;
    console.log(
      `dead waiter: the next waiter got the lock ${stalledMs.toFixed(0)} ms after the release (grace ${graceMs} ms)`,
    );
    expect(stalledMs).toBeGreaterThan(graceMs - 50);
    expect(stalledMs).toBeLessThan(graceMs + 600);
    await handle.release();
  });

  it('stops waiting on abort, resolving busy, and leaves the queue', async () => {
    const holder = opened.process(nodes.five);
    const waiter = opened.process(nodes.five);
    const held = await holder.locks.acquire('abort', { waitTime: 0 });
    const controller = new AbortController();
    const waiting = waiter.locks.acquire('abort', {
      waitTime: 10_000,
      signal: controller.signal,
    });
    const settled = expect(waiting).rejects.toThrow(/held by another owner/);
    await sleep(100);
    const abortedAt = performance.now();
    controller.abort();
    await settled;
    // At once, not at the end of the wait (the other spec file shares the CPU).
    expect(performance.now() - abortedAt).toBeLessThan(200);
    await sleep(20);
    const queued = await Promise.all(
      nodes.look.map((c) => c.zcard('lock:{abort}:qwaiters')),
    );
    expect(queued).toEqual([0, 0, 0, 0, 0]);
    await held.release();
  });

  it('measures acquire p50 against a raw parallel SET NX PX on 5 nodes', async () => {
    const { backend, clients } = opened.process(nodes.five);
    await ready(clients);
    const raw = opened.clients(nodes.five);
    await ready(raw);
    const rounds = 300;
    const quorumMs: number[] = [];
    const rawMs: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const key = `lock:{bench}`;
      const token = `bench-token-${i}-0000000000`;
      let startedAt = performance.now();
      const grant = await backend.acquire({
        key,
        token,
        leaseMs: 10_000,
        waitMs: 0,
      });
      quorumMs.push(performance.now() - startedAt);
      expect(grant.acquired).toBe(true);
      await backend.release(key, token);

      startedAt = performance.now();
      await Promise.all(
        raw.map((c) => c.set('raw:{bench}', token, 'PX', 10_000, 'NX')),
      );
      rawMs.push(performance.now() - startedAt);
      await Promise.all(raw.map((c) => c.del('raw:{bench}')));
    }
    const p50 = percentile(quorumMs.slice(20), 50);
    const rawP50 = percentile(rawMs.slice(20), 50);
    console.log(
      `acquire on 5 nodes: p50 ${p50.toFixed(3)} ms, p99 ${percentile(quorumMs.slice(20), 99).toFixed(3)} ms; raw parallel SET NX PX: p50 ${rawP50.toFixed(3)} ms, p99 ${percentile(rawMs.slice(20), 99).toFixed(3)} ms`,
    );
    expect(p50).toBeLessThan(rawP50 * 5 + 1);
  });
});
