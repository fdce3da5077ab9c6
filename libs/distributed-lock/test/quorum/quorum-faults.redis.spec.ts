import { LockBackendError } from '../../src/errors/lock-errors.js';
import type { LockLostEvent } from '../../src/lock-service/lock-events.js';
import { FencedResource } from '../../../../test/support/fenced-resource.js';
import {
  eventually,
  ready,
  seeded,
  sleep,
  useQuorumNodes,
  type QuorumProcess,
} from './quorum-fixtures.js';

const nodes = useQuorumNodes({ five: true, three: true });
const { opened } = nodes;

/**
 * Runs `callers` loops per process, each taking `key` through LockService
 * and entering the referee with a fencing token, until `stop()` says so.
 */
function contend(
  processes: readonly QuorumProcess[],
  callers: number,
  referee: FencedResource,
  stop: () => boolean,
  seed: number,
  sections: number[] = [],
): Promise<{ sections: number[]; errors: string[] }> {
  const random = seeded(seed);
  const errors: string[] = [];
  const loops = processes.flatMap((process, p) =>
    Array.from({ length: callers }, async (_, c) => {
      const name = `p${p}c${c}`;
      while (!stop()) {
        try {
          await process.locks.using('hot', async (lock) => {
            referee.enter(name);
            try {
              // A holder that lost its majority to a kill gets no token.
              referee.write(await lock.fence(), name);
              await sleep(Math.floor(random() * 3));
              sections.push(Date.now());
            } finally {
              referee.leave(name);
            }
          });
        } catch (error) {
          errors.push((error as Error).constructor.name);
          await sleep(10);
        }
      }
    }),
  );
  return Promise.all(loops).then(() => ({ sections, errors }));
}

describe('QuorumLockBackend with nodes failing', () => {
  it('keeps mutual exclusion and progress while 1, then 2 of 5 nodes are killed', async () => {
    const processes = [0, 1, 2].map(() =>
      opened.process(nodes.five, { watchdogLeaseTime: 2_000, waitTime: 3_000 }),
    );
    await ready(processes.flatMap((p) => p.clients));
    const referee = new FencedResource();
    const sectionsSoFar: number[] = [];
    // The phases count from the first critical section: connecting and
    // opening the sessions on five nodes is not progress under faults.
    let startedAt = Number.POSITIVE_INFINITY;
    const killedAt = [0, 0];
    const running = contend(
      processes,
      2,
      referee,
      () => Date.now() - startedAt > 2_400,
      7,
      sectionsSoFar,
    );
    await eventually(() => sectionsSoFar.length > 0, 10_000);
    startedAt = Date.now();
    await sleep(600);
    await nodes.five[0].kill();
    killedAt[0] = Date.now();
    await sleep(800);
    await nodes.five[1].kill();
    killedAt[1] = Date.now();
    const { sections, errors } = await running;
    const phases = [
      sections.filter((t) => t < killedAt[0]).length,
      sections.filter((t) => t >= killedAt[0] && t < killedAt[1]).length,
      sections.filter((t) => t >= killedAt[1]).length,
    ];
    console.log(
      `contention, 5 nodes: ${phases.join(' / ')} critical sections with 0 / 1 / 2 nodes killed; errors: ${errors.length ? errors.join(', ') : 'none'}`,
    );
    expect(referee.overlaps).toBe(0);
    expect(referee.rejected).toBe(0);
    expect(phases.every((n) => n > 5)).toBe(true);
    // The only failures: a holder whose majority a kill took, told so.
    for (const error of errors) expect(error).toBe('LockLostError');
    const tokens = referee.acceptedTokens;
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  it('fails with LockBackendError when 3 of 5 nodes are gone', async () => {
    const { locks, backend, clients } = opened.process(nodes.five);
    await ready(clients);
    await Promise.all([
      nodes.five[0].kill(),
      nodes.five[2].kill(),
      nodes.five[4].kill(),
    ]);
    await expect(locks.acquire('gone', { waitTime: 0 })).rejects.toThrow(
      LockBackendError,
    );
    const waited = locks.acquire('gone', { waitTime: 300 });
    await expect(waited).rejects.toThrow(/only 2 of 5 Redis nodes answered/);
    await expect(backend.isLocked('lock:{gone}')).rejects.toThrow(
      LockBackendError,
    );
    await expect(backend.release('lock:{gone}', 'x')).rejects.toThrow(
      LockBackendError,
    );
  });

  it('tells a holder whose majority is gone that its lock is lost, by its deadline (renewal failed)', async () => {
    const { locks, clients } = opened.process(nodes.five, {
      watchdogLeaseTime: 1_500,
    });
    await ready(clients);
    const lost: LockLostEvent[] = [];
    locks.events.on('lost', (event) => lost.push(event));
    const handle = await locks.acquire('majority');
    await Promise.all([
      nodes.five[1].kill(),
      nodes.five[2].kill(),
      nodes.five[3].kill(),
    ]);
    // Two nodes cannot tell whether a majority still holds it.
    await expect(handle.extend(1_500)).rejects.toBeInstanceOf(LockBackendError);
    await eventually(() => handle.lost, 2_000);
    expect(lost.map((e) => [e.key, e.reason])).toEqual([
      ['majority', 'renewal-failed'],
    ]);
  });

  it('issues strictly increasing fencing tokens while majorities change and nodes restart empty', async () => {
    const key = 'lock:{fence}';
    const look = opened.clients(nodes.five);
    await ready(look);
    // Node 0's counter is far ahead, as if its clock ran fast: only the
    // write-back carries its tokens to the other nodes.
    const ahead = Date.now() * 1000 + 1e12;
    await look[0].set(`${key}:qfence`, String(ahead));
    const rounds: Array<{ kill: number[]; restart: number[] }> = [
      { kill: [3, 4], restart: [] },
      { kill: [0], restart: [3, 4] },
      { kill: [1, 2], restart: [0] },
      { kill: [3], restart: [1, 2] },
      { kill: [4, 0], restart: [3] },
    ];
    const tokens: number[] = [];
    let round = 0;
    for (const { kill, restart } of rounds) {
      await Promise.all(restart.map((n) => nodes.five[n].restart()));
      await Promise.all(kill.map((n) => nodes.five[n].kill()));
      // A new process each round: none of them saw the restarts.
      const { backend } = opened.process(nodes.five);
      const token = `fence-round-${round++}-00000000000`;
      const grant = await backend.acquire({
        key,
        token,
        leaseMs: 2_000,
        waitMs: 2_000,
      });
      expect(grant.acquired).toBe(true);
      tokens.push((await backend.fence(key, token))!);
      expect(await backend.release(key, token)).toBe(true);
    }
    console.log(
      `fencing tokens over changing majorities: ${tokens.join(', ')}`,
    );
    expect(tokens[0]).toBeGreaterThan(ahead);
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });
});

describe('QuorumLockBackend restart guard', () => {
  it("does not count a restarted node's vote until maxLeaseMs has passed", async () => {
    const maxLeaseMs = 2_000;
    const key = 'lock:{restart}';
    const holder = opened.process(nodes.three, { maxLeaseMs });
    const contender = opened.process(nodes.three, { maxLeaseMs });
    await ready([...holder.clients, ...contender.clients]);
    // Let both read every node's run_id first.
    await sleep(50);
    const held = await holder.backend.acquire({
      key,
      token: 'restart-holder-0000000000',
      leaseMs: maxLeaseMs,
      waitMs: 0,
    });
    expect(held.acquired).toBe(true);

    // B and C restart empty: the holder's lock now lives on A only.
    await Promise.all([nodes.three[1].restart(), nodes.three[2].restart()]);
    await eventually(
      () => contender.clients.every((client) => client.status === 'ready'),
      3_000,
    );
    await eventually(async () => {
      const muted = contender.backend.mutedNodes();
      return muted.length === 2 && muted[0] === 1 && muted[1] === 2;
    });
    const restartSeenAt = performance.now();
    const attempt = {
      key,
      token: 'restart-contender-000000',
      leaseMs: 1_000,
      waitMs: 0,
    };
    // B and C grant it, but their votes do not count: no majority.
    expect(await contender.backend.acquire(attempt)).toMatchObject({
      acquired: false,
    });
    expect(
      await holder.backend.extend(key, 'restart-holder-0000000000', 2_000),
    ).toBe(false);

    // Without the guard B and C would be a majority while the holder's lease
    // still runs: a process that never saw the restart shows it, once the
    // contender has given back the votes nobody counted (in the background:
    // one CI run raced it and found B and C still taken).
    const [, nodeB, nodeC] = opened.clients(nodes.three);
    await eventually(
      async () => (await nodeB.exists(key)) + (await nodeC.exists(key)) === 0,
    );
    const unaware = opened.process(nodes.three, { maxLeaseMs });
    await ready(unaware.clients);
    const unguarded = await unaware.backend.acquire({
      ...attempt,
      token: 'restart-unaware-00000000',
    });
    expect(unguarded).toMatchObject({ acquired: true });
    await unaware.backend.release(key, 'restart-unaware-00000000');

    // Once maxLeaseMs has passed since the restart was seen, they count again.
    await sleep(maxLeaseMs - (performance.now() - restartSeenAt) + 20);
    expect(contender.backend.mutedNodes()).toEqual([]);
    expect(await contender.backend.acquire(attempt)).toMatchObject({
      acquired: true,
    });
  });
});
