/**
 * Callers that leave: an acquisition aborted on its way to Redis, and
 * close() while acquisitions wait or are on their way, or while a lock is
 * being handed to a waiter that is leaving.
 */
import { LockNotAcquiredError } from '@app/distributed-lock';
import { expectNothingLeft } from '../../../../test/support/backend-internals.js';
import { eventually } from '../../../../test/support/lock-fixtures.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength } = fixture;

describe('aborting and giving up', () => {
  it('an abort while the acquisition is on its way to Redis stops the wait at once', async () => {
    const a = open();
    const b = open();
    const holder = await a.locks.acquire('abort-early', { leaseTime: 10_000 });
    const controller = new AbortController();
    const started = performance.now();
    const attempt = b.locks
      .acquire('abort-early', { waitTime: 5_000, signal: controller.signal })
      .catch((error: unknown) => error);
    controller.abort();
    expect(await attempt).toBeInstanceOf(LockNotAcquiredError);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(await queueLength('abort-early')).toBe(0);
    await holder.release();
    expectNothingLeft(b.backend);
  });
});

describe('shutdown', () => {
  it('close() does not strand a lock handed over to a waiter that is leaving', async () => {
    const s = open();
    const holder = await s.locks.acquire('closing');
    const waiting = s.locks
      .acquire('closing', { waitTime: 5_000 })
      .catch((error: unknown) => error);
    await eventually(async () => (await queueLength('closing')) === 1);
    // The release reaches Redis first and hands the lock to the waiter, which
    // close() sends away at the same moment.
    const released = holder.release();
    await s.close();
    expect(await released).toBe(true);
    expect(await waiting).toBeInstanceOf(LockNotAcquiredError);
    expect(await fixture.redis.exists('lock:{closing}')).toBe(0);
    expect(await queueLength('closing')).toBe(0);
  });

  it('close() settles acquisitions still on their way and leaves nothing locked', async () => {
    const s = open();
    const rival = open();
    const blocker = await rival.locks.acquire('in-flight-busy');
    const queued = s.locks
      .acquire('in-flight-busy', { waitTime: 5_000 })
      .catch((error: unknown) => error);
    const direct = s.locks
      .acquire('in-flight-free', { waitTime: 0 })
      .catch((error: unknown) => error);
    const started = performance.now();
    await s.close();
    const results = await Promise.all([queued, direct]);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(results[0]).toBeInstanceOf(LockNotAcquiredError);
    expect(results[1]).toBeInstanceOf(LockNotAcquiredError);
    expect(await fixture.redis.exists('lock:{in-flight-free}')).toBe(0);
    expect(await queueLength('in-flight-busy')).toBe(0);
    await blocker.release();
    expect(await fixture.redis.exists('lock:{in-flight-busy}')).toBe(0);
  });
});
