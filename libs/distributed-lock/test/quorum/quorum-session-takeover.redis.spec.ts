/**
 * When the quorum backend frees a lock bound to a process session: only once
 * the session is gone on a majority of the nodes that count, however its
 * nodes and the lock's differ (see quorum-sessions.ts).
 */
import {
  newSessionId,
  sessionKey,
  sessionToken,
} from '../../src/session/session-token.js';
import { eventually, ready, useQuorumNodes } from './quorum-fixtures.js';

const nodes = useQuorumNodes({ three: true, look: 'three' });
const { opened } = nodes;

/** The session key of `id` on the nodes, under the default prefix. */
const storedSession = (id: string) => sessionKey('lock:', id);

/**
 * A holder and a waiter process, ready, and a session of the holder's open
 * for `ttl` ms.
 */
async function holderAndWaiter(ttl: number) {
  const holder = opened.process(nodes.three);
  const waiter = opened.process(nodes.three);
  await ready([...holder.clients, ...waiter.clients]);
  const id = newSessionId();
  await holder.backend.sessions.open(id, ttl);
  return { holder, waiter, id };
}

describe('QuorumLockBackend session takeover', () => {
  it("frees a lock only once its holder's session is gone on a majority, not on one node", async () => {
    const { holder, waiter, id } = await holderAndWaiter(10_000);
    const key = 'lock:{split}';
    const token = sessionToken(id, 'holder-random-000000000');
    const grant = await holder.backend.acquire({
      key,
      token,
      leaseMs: 10_000,
      waitMs: 0,
    });
    expect(grant.acquired).toBe(true);
    await eventually(async () =>
      (await Promise.all(nodes.look.map((c) => c.get(key)))).every(
        (stored) => stored === token,
      ),
    );
    // The lock held on nodes 0 and 2, the session renewed on 0 and 1: node
    // 2 losing the session must not let a waiter take nodes 1 and 2.
    await nodes.look[1].del(key);
    await nodes.look[2].del(storedSession(id));
    const request = {
      key,
      token: 'waiter-token-00000000000',
      leaseMs: 5_000,
      waitMs: 0,
    };
    expect((await waiter.backend.acquire(request)).acquired).toBe(false);
    expect(await waiter.backend.isLocked(key)).toBe(true);
    expect(await holder.backend.extend(key, token, 10_000)).toBe(true);

    // Gone on nodes 0 and 2 too: a majority. The lock is free.
    await nodes.look[0].del(storedSession(id));
    expect(await waiter.backend.isLocked(key)).toBe(false);
    const taken = await waiter.backend.acquire(request);
    expect(taken.acquired).toBe(true);
    expect(await holder.backend.extend(key, token, 10_000)).toBe(false);
  });

  it('does not count a node that restarted empty as having lost a session until it votes again', async () => {
    const { holder, waiter, id } = await holderAndWaiter(10_000);
    const key = 'lock:{restarted}';
    const token = sessionToken(id, 'holder-random-000000000');
    await holder.backend.acquire({ key, token, leaseMs: 10_000, waitMs: 0 });
    await nodes.three[2].restart();
    await eventually(() => waiter.backend.mutedNodes().includes(2));
    await nodes.look[0].del(storedSession(id));
    // Gone on node 0, and on node 2 only because it restarted.
    const tried = await waiter.backend.acquire({
      key,
      token: 'waiter-token-00000000000',
      leaseMs: 5_000,
      waitMs: 0,
    });
    expect(tried.acquired).toBe(false);
    expect(await waiter.backend.isLocked(key)).toBe(true);
  });

  it('waits for a session-bound holder until its session lapses, not its lock lease', async () => {
    const { holder, waiter, id } = await holderAndWaiter(800);
    const key = 'lock:{abandoned}';
    const grant = await holder.backend.acquire({
      key,
      token: sessionToken(id, 'holder-random-000000000'),
      leaseMs: 30_000,
      waitMs: 0,
    });
    expect(grant.acquired).toBe(true);
    const busy = await waiter.backend.acquire({
      key,
      token: 'impatient-token-0000000',
      leaseMs: 5_000,
      waitMs: 0,
    });
    // The holder's remaining lease as the waiter sees it: its session's.
    expect(busy).toMatchObject({ acquired: false });
    expect(busy.acquired === false && busy.retryAfterMs).toBeLessThanOrEqual(
      800,
    );
    const startedAt = performance.now();
    const waited = await waiter.backend.acquire({
      key,
      token: 'patient-token-000000000',
      leaseMs: 5_000,
      waitMs: 5_000,
    });
    expect(waited.acquired).toBe(true);
    expect(performance.now() - startedAt).toBeLessThan(800 + 500);
  });

  it('leaves a node whose open came late out of the renewals: its copy may have been seen gone first', async () => {
    const { backend, clients } = opened.process(nodes.three, {
      nodeTimeoutMs: 300,
    });
    await ready(clients);
    await nodes.three[2].freeze();
    const id = newSessionId();
    await backend.sessions.open(id, 5_000);
    // The open's SET NX runs on node 2 once it is back, after the open ended.
    await nodes.three[2].thaw();
    await eventually(
      async () => (await nodes.look[2].exists(storedSession(id))) === 1,
    );
    await nodes.look[1].del(storedSession(id));
    expect(await backend.sessions.renew(id, 5_000)).toBe(false);
  });
});
