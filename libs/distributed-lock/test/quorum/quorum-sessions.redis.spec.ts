/**
 * Process sessions on the quorum backend through LockService: takeover after
 * a holder's process died, renewals on a majority, and their traffic.
 */
import {
  LockBackendError,
  LockNotAcquiredError,
} from '../../src/errors/lock-errors.js';
import type { LockLostEvent } from '../../src/lock-service/lock-events.js';
import {
  newSessionId,
  sessionKey,
  sessionOf,
} from '../../src/session/session-token.js';
import {
  commandCalls,
  ready,
  sleep,
  useQuorumNodes,
} from './quorum-fixtures.js';

const nodes = useQuorumNodes({ three: true, look: 'three' });
const { opened } = nodes;

/** PEXPIRE (session renewals) and EVALSHA (lock scripts) run so far, per node. */
const sessionAndScriptCalls = () =>
  Promise.all(
    nodes.look.map(async (client) => ({
      pexpire: await commandCalls(client, 'pexpire'),
      scripts: await commandCalls(client, 'evalsha'),
    })),
  );

/** The session key of `id` on the nodes, under the default prefix. */
const storedSession = (id: string) => sessionKey('lock:', id);

describe('QuorumLockBackend process sessions', () => {
  it("hands a lock to a waiter in another process within the TTL once its holder's process died, with a higher fence", async () => {
    const ttl = 1_000;
    const holder = opened.process(nodes.three, { sessionTtl: ttl });
    const waiter = opened.process(nodes.three, { sessionTtl: ttl });
    await ready([...holder.clients, ...waiter.clients]);
    const told: LockLostEvent[] = [];
    holder.locks.events.on('lost', (event) => told.push(event));
    const held = await holder.locks.acquire('job');
    expect(sessionOf(held.token)).toBeDefined();
    const deadHoldersFence = await held.fence();
    const waiting = waiter.locks.acquire('job', { waitTime: 10_000 });
    await sleep(100);

    // The process dies: nothing renews its session, nothing ends it.
    const diedAt = performance.now();
    for (const client of holder.clients) client.disconnect();
    const handle = await waiting;
    const grantedAt = performance.now();
    console.log(
      `session takeover: the waiter got the lock ${(grantedAt - diedAt).toFixed(0)} ms after its holder's process died (session TTL ${ttl} ms)`,
    );
    expect(grantedAt - diedAt).toBeLessThan(ttl + 1_000);
    // Its session's deadline had passed: the hold says so to whoever looks.
    expect(held.lost).toBe(true);
    expect(told.map((event) => event.reason)).toEqual(['session-expired']);
    expect(await handle.fence()).toBeGreaterThan(deadHoldersFence);
    expect(await handle.release()).toBe(true);
  });

  it("keeps a lock while its holder's session is renewed, well past the TTL", async () => {
    const ttl = 600;
    const holder = opened.process(nodes.three, { sessionTtl: ttl });
    const waiter = opened.process(nodes.three, { sessionTtl: ttl });
    await ready([...holder.clients, ...waiter.clients]);
    const held = await holder.locks.acquire('kept');
    await expect(
      waiter.locks.acquire('kept', { waitTime: 3 * ttl }),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(held.lost).toBe(false);
    expect(await waiter.locks.isLocked('kept')).toBe(true);
    expect(await held.release()).toBe(true);
    expect(await waiter.locks.isLocked('kept')).toBe(false);
  });

  it('opens and renews sessions with one node of three down (a majority)', async () => {
    await nodes.three[2].kill();
    const ttl = 600;
    const { locks, backend, clients } = opened.process(nodes.three, {
      sessionTtl: ttl,
    });
    await ready(clients.slice(0, 2));
    const held = await locks.acquire('one-down');
    const id = sessionOf(held.token) as string;
    await sleep(3 * ttl);
    expect(held.lost).toBe(false);
    for (const client of nodes.look.slice(0, 2))
      expect(await client.pttl(storedSession(id))).toBeGreaterThan(0);
    expect(await backend.sessions.renew(id, ttl)).toBe(true);
    expect(await held.release()).toBe(true);
  });

  it('renews a session while a majority has it, says false once it is gone on a majority, and never brings it back', async () => {
    const { backend, clients } = opened.process(nodes.three);
    await ready(clients);
    const { sessions } = backend;
    const id = newSessionId();
    await sessions.open(id, 5_000);
    expect(await sessions.renew(id, 5_000)).toBe(true);
    await nodes.look[0].del(storedSession(id));
    expect(await sessions.renew(id, 5_000)).toBe(true);
    await nodes.look[1].del(storedSession(id));
    expect(await sessions.renew(id, 5_000)).toBe(false);
    expect(await nodes.look[0].exists(storedSession(id))).toBe(0);
    expect(await nodes.look[1].exists(storedSession(id))).toBe(0);

    const lapsing = newSessionId();
    await sessions.open(lapsing, 300);
    await sleep(400);
    expect(await sessions.renew(lapsing, 5_000)).toBe(false);
    for (const client of nodes.look)
      expect(await client.exists(storedSession(lapsing))).toBe(0);
  });

  it('rejects a renewal with LockBackendError when too few nodes answer to tell', async () => {
    const { backend, clients } = opened.process(nodes.three, {
      nodeTimeoutMs: 300,
    });
    await ready(clients);
    const id = newSessionId();
    await backend.sessions.open(id, 5_000);
    await Promise.all([nodes.three[1].freeze(), nodes.three[2].freeze()]);
    await expect(backend.sessions.renew(id, 5_000)).rejects.toBeInstanceOf(
      LockBackendError,
    );
  });

  it('renews with one command per node per renewal whatever the number of locks (INFO commandstats)', async () => {
    const ttl = 600;
    const locks = 200;
    const {
      backend,
      clients,
      locks: service,
    } = opened.process(nodes.three, {
      sessionTtl: ttl,
      maxLeaseMs: 30_000,
    });
    await ready(clients);
    const handles = await Promise.all(
      Array.from({ length: locks }, (_, i) => service.acquire(`bulk:${i}`)),
    );
    const { sessions } = backend;
    let renewals = 0;
    const renew = sessions.renew.bind(sessions);
    sessions.renew = (id, ttlMs) => {
      renewals += 1;
      return renew(id, ttlMs);
    };
    const before = await sessionAndScriptCalls();
    const renewalsBefore = renewals;
    await sleep(2_000);
    const after = await sessionAndScriptCalls();
    const renewed = renewals - renewalsBefore;
    const perNode = after.map((a, node) => a.pexpire - before[node].pexpire);
    const lockScripts = after.map(
      (a, node) => a.scripts - before[node].scripts,
    );
    console.log(
      `session renewals with ${locks} locks held: ${renewed} renewals in 2 s; PEXPIRE per node ${perNode.join(' / ')}; lock scripts per node ${lockScripts.join(' / ')}`,
    );
    expect(renewed).toBeGreaterThanOrEqual(5);
    // A renewal under way at either snapshot may land on either side.
    for (const calls of perNode)
      expect(Math.abs(calls - renewed)).toBeLessThanOrEqual(1);
    for (const calls of lockScripts) expect(calls).toBe(0);
    expect(handles.every((handle) => !handle.lost)).toBe(true);
    await Promise.all(handles.map((handle) => handle.release()));
  });
});
