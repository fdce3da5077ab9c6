/**
 * Which connections DistributedLockModule owns, and what closing the app does
 * to them, to waiters, to sessions and leases, and to the process.
 */
import { Redis } from 'ioredis';
import {
  DistributedLockModule,
  LockNotAcquiredError,
  LockService,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { runTs } from '../../../../test/support/processes.js';
import { otherConnections, within } from './module-helpers.js';
import { useModuleServer } from './module-server-fixture.js';

const fixture = useModuleServer();
const { start, stop, connectionCount } = fixture;

describe('connection ownership and shutdown', () => {
  it('opens its own connections for a URL and closes all of them on close', async () => {
    // Connections of earlier tests' apps may take a moment to go.
    await eventually(async () => (await connectionCount()) === 0);
    const app = await start({
      imports: [DistributedLockModule.forRoot({ redis: fixture.server.url })],
    });
    const locks = app.get(LockService);
    await locks.acquire('conn:a');
    await locks.acquire('conn:b');
    expect(await connectionCount()).toBe(1);

    // Waiters block on one wake-list connection per process, however many.
    const waiters = ['conn:a', 'conn:b'].map((key) =>
      locks.acquire(key, { waitTime: 10_000 }).then(
        () => 'acquired',
        (error: unknown) => error,
      ),
    );
    await eventually(async () => (await connectionCount()) === 2);
    await sleep(100);
    expect(await connectionCount()).toBe(2);

    // Close without releasing: waiters give up, every connection goes.
    await within(stop(app), 5_000, 'app.close()');
    for (const outcome of await Promise.all(waiters)) {
      expect(outcome).toBeInstanceOf(LockNotAcquiredError);
    }
    await eventually(async () => (await connectionCount()) === 0, 3_000);
  });

  it('uses a given ioredis client as is and leaves it open on close', async () => {
    const client = new Redis(fixture.server.url);
    try {
      await client.ping();
      await eventually(async () => (await connectionCount()) === 1);
      const before = await otherConnections(fixture.observer);
      const app = await start({
        imports: [DistributedLockModule.forRoot({ redis: client })],
      });
      const locks = app.get(LockService);

      await locks.acquire('given:busy');
      expect(await client.exists('lock:{given:busy}')).toBe(1);
      // No connection of its own, only the wake-list one once someone waits.
      expect(await otherConnections(fixture.observer)).toEqual(before);
      const waiter = locks.acquire('given:busy', { waitTime: 10_000 }).then(
        () => 'acquired',
        (error: unknown) => error,
      );
      await eventually(
        async () => (await connectionCount()) === before.length + 1,
      );

      await within(stop(app), 5_000, 'app.close()');
      expect(await waiter).toBeInstanceOf(LockNotAcquiredError);
      expect(client.status).toBe('ready');
      expect(await client.ping()).toBe('PONG');
      await eventually(
        async () => (await connectionCount()) === before.length,
        3_000,
      );
      expect(await otherConnections(fixture.observer)).toEqual(before);
    } finally {
      client.disconnect();
    }
  });

  it('on close, lets the session lapse under a lock still held, and ends an idle one at once', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({
          redis: fixture.server.url,
          sessionTtl: 600,
        }),
      ],
    });
    const closing = app.get(LockService);
    const lost: string[] = [];
    closing.events.on('lost', (event) => lost.push(event.reason));
    const handle = await closing.acquire('bound');
    // The session is renewed every 200 ms: still held well past its 600 ms TTL.
    await sleep(900);
    const other = await start({
      imports: [DistributedLockModule.forRoot({ redis: fixture.server.url })],
    });
    const locks = other.get(LockService);
    expect(await locks.isLocked('bound')).toBe(true);

    // A handler may still run under the lock: it keeps it until the session,
    // no longer renewed, lapses.
    await stop(app);
    const closedAt = Date.now();
    const [session] = await fixture.observer.keys('lock:session:*');
    expect(await fixture.observer.pttl(session)).toBeLessThanOrEqual(600);
    expect(handle.lost).toBe(false);
    await eventually(async () => !(await locks.isLocked('bound')), 2_000);
    expect(Date.now() - closedAt).toBeLessThan(1_600);
    // Told, as ever, before anyone else could have the lock.
    expect(handle.lost).toBe(true);
    expect(handle.signal.aborted).toBe(true);
    expect(lost).toEqual(['session-expired']);
    const taken = await locks.acquire('bound', { waitTime: 0 });
    expect(await taken.fence()).toBeGreaterThan(0);
    await taken.release();

    // Nothing held: the session ends with the app.
    await stop(other);
    expect(await fixture.observer.keys('lock:session:*')).toEqual([]);
  });

  it('stops renewing on close: an unreleased watchdog lock runs out its lease', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({
          redis: fixture.server.url,
          sessionTtl: false,
          watchdogLeaseTime: 600,
        }),
      ],
    });
    const locks = app.get(LockService);
    await locks.acquire('renewed');
    // Renewed every 200 ms: still held well past its 600 ms lease.
    await sleep(900);
    expect(await fixture.observer.exists('lock:{renewed}')).toBe(1);

    await stop(app);
    const first = await fixture.observer.pttl('lock:{renewed}');
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(600);
    await sleep(250);
    const second = await fixture.observer.pttl('lock:{renewed}');
    expect(second === -2 || second < first).toBe(true);
    await eventually(
      async () => (await fixture.observer.exists('lock:{renewed}')) === 0,
      2_000,
    );
  });

  it('leaves nothing that keeps the process alive after close', async () => {
    const worker =
      'libs/distributed-lock/test/module/fixtures/close-then-exit.ts';
    const stdout = await runTs(worker, [fixture.server.url], 20_000);
    const exitedAt = Date.now();
    const report = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as {
      closedAt: number;
      waiter: string;
      fencingToken: number;
    };
    expect(report.waiter).toBe('LockNotAcquiredError');
    expect(report.fencingToken).toBeGreaterThan(0);
    // It exits by itself soon after close (a leaked connection would keep it
    // running until runTs kills it); generous bound for a loaded machine.
    expect(exitedAt - report.closedAt).toBeLessThan(5_000);
    await eventually(async () => (await connectionCount()) === 0, 2_000);
    // The held lock is bound to the app's session, left to lapse: nobody
    // renews it any more.
    const holder = await fixture.observer.get('lock:{worker:held}');
    const sessionId = /^([\w-]+)\./.exec(holder ?? '')?.[1];
    expect(sessionId).toBeDefined();
    const pttl = await fixture.observer.pttl(`lock:session:{${sessionId}}`);
    expect(pttl).toBeLessThanOrEqual(5_000);
  });
});
